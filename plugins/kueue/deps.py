"""What a Kueue restore contacts and what the restored configuration points at (independence analysis).

Beyond the kubernetes plugin's findings (the target API server, and any address the objects carry),
Kueue's own: MultiKueue sends workloads to worker clusters, whose API servers are named inside the
kubeconfig Secrets — a restored manager cluster that depends on workers in the failed failure domain
has not recovered. Only the ``server`` URLs are read from those kubeconfigs; the credentials are named
(where they are held), never copied into the report.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from drtool import yamlio
from drtool.kube.references import dependencies as kubernetes_dependencies
from drtool.plugin.contract import Dependency, RestoreContext

from .bundle import Bundle, load
from .kinds import MK_CLUSTERS, SECRETS
from .refs import cluster_secret, kubeconfig_source, object_key

Obj = dict[str, Any]


def kubeconfig_servers(secret: Obj) -> list[str]:
    """The ``clusters[].cluster.server`` URLs of a Secret's ``kubeconfig`` key (nothing else is read)."""
    raw = (secret.get("data") or {}).get("kubeconfig")
    if not raw:
        return []
    try:
        config = yamlio.loads(base64.b64decode(raw))
    except (binascii.Error, yaml.YAMLError, ValueError):
        return []
    clusters = config.get("clusters") if isinstance(config, dict) else None
    return [
        c["cluster"]["server"] for c in clusters or [] if isinstance(c, dict) and (c.get("cluster") or {}).get("server")
    ]


def multikueue(bundle: Bundle) -> Iterator[Dependency]:
    secrets = {object_key(r["object"]): r["object"] for r in bundle.records.get(SECRETS, ())}
    for rec in bundle.records.get(MK_CLUSTERS, ()):
        cluster = rec["object"]
        who = f"MultiKueueCluster {object_key(cluster)}"
        for _kind, key, _field in cluster_secret(cluster, bundle.kueue_namespace):
            yield Dependency("credential", f"Secret {key}", "kubeconfig of a MultiKueue worker cluster", who)
            for server in kubeconfig_servers(secrets.get(key, {})):
                yield Dependency("reference", server, "MultiKueue worker cluster API server", f"{who} via Secret {key}")
        kubeconfig, field = kubeconfig_source(cluster)
        if kubeconfig.get("locationType") == "Path":
            where = f"file {kubeconfig.get('location')} on the Kueue manager"
            yield Dependency("credential", where, "kubeconfig of a MultiKueue worker cluster (not backed up)", field)
        profile = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("clusterProfileRef")
        if profile:
            what = f"ClusterProfile {profile.get('name')}"
            yield Dependency("reference", what, "MultiKueue worker cluster, via the Cluster Inventory API", who)


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    return list(kubernetes_dependencies(ctx, target)) + list(multikueue(load(ctx, (MK_CLUSTERS, SECRETS))))
