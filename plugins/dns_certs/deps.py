"""What a dns-certs restore contacts, and what the restored state still points at.

Beyond the kubernetes plugin's findings on the same objects (the target API server, ACME and Vault servers
of issuers, CoreDNS's upstream ``forward`` servers): the DNS server the zones are updated on and the TSIG
key file it needs, and — as ``reference`` dependencies — every entry of the DNS cut-over list: a record
that points at a load balancer address of the backed-up cluster, which the independence analysis holds
against that cluster's failure domain (its ``loadbalancer_addresses``/``ingress_addresses``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.kube.references import dependencies as kubernetes_dependencies
from drtool.plugin.contract import Dependency, RestoreContext

from .settings import RestoreSettings
from .view import KubeView


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    s = RestoreSettings.parse(target, {})
    view = KubeView(ctx)
    out = kubernetes_dependencies(view, target) if s.kubernetes and view.artifacts else []  # type: ignore[arg-type]
    if s.dns is not None:
        out.append(Dependency("endpoint", s.dns.address, "DNS server the zones are restored to (RFC 2136 + AXFR)"))
        if s.dns.key_file:
            out.append(Dependency("credential", s.dns.key_file, "TSIG key the DNS server accepts updates with"))
    for c in (ctx.plugin_meta or {}).get("cutover") or []:
        out.append(
            Dependency(
                "reference",
                c["address"],
                f"DNS record {c['record']} points at the old cluster's load balancer ({c['owner']}): re-point it",
                c["source"],
            )
        )
    return out
