"""Scenario ``certs-dns-lost``: cert-manager's issuer Secrets deleted (the CA key pairs, the ACME account key,
the DNS01 solver's credentials) and records removed from the zone the platform serves from (a bad
ExternalDNS sync, a clean-up script): no new certificate can be issued and the names stop resolving.

Recovered by restore-plans/dns-certs-restore.yaml: the Secrets back with their own keys, the zone's records
back by RFC 2136 (``serial: raise``: the zone was changed in place, so its serial only goes up), judged by
its ``no-reissue`` check (cert-manager re-issues no certificate) and the zone read back equal to the backup.

The issuer Secrets are found as cert-manager finds them: every ``secretName`` and ``*SecretRef`` an Issuer
or ClusterIssuer names (a ClusterIssuer's in cert-manager's cluster resource namespace). The records go by
TSIG-signed RFC 2136 deletes, each owner name's every RRset; the failure shows when the Secrets are gone and
none of those names resolves at the zone's server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.update

from drtool.errors import SourceError
from drtool.kube.client import KubeClient
from drtool.kube.readings import items

CERT_MANAGER = "/apis/cert-manager.io/v1"


def _secret_names(value: Any) -> Iterator[str]:
    """``secretName`` of a CA issuer and every ``*SecretRef``'s name, anywhere in an issuer's spec: the rule the
    dns-certs plugin backs them up by (its ``kinds.secret_refs``; the product core does not import plugins)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "secretName" and isinstance(item, str):
                yield item
            elif key.lower().endswith("secretref") and isinstance(item, dict) and item.get("name"):
                yield str(item["name"])
            else:
                yield from _secret_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _secret_names(item)


def issuer_secrets(client: KubeClient, cluster_resource_namespace: str) -> list[str]:
    """namespace/name of every Secret an Issuer or ClusterIssuer names, sorted."""
    found = set()
    for kind in ("issuers", "clusterissuers"):
        for issuer in items(client, f"{CERT_MANAGER}/{kind}"):
            namespace = issuer["metadata"].get("namespace") or cluster_resource_namespace
            found |= {f"{namespace}/{name}" for name in _secret_names(issuer.get("spec") or {})}
    return sorted(found)


@dataclasses.dataclass
class CertsDnsLost:
    zone: str
    names: list[str]  # owner names in the zone (relative) whose every record is removed
    dns_host: str
    dns_port: int
    tsig: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False)  # dnspython's update keywords
    cluster_resource_namespace: str = "cert-manager"
    scenario: str = "certs-dns-lost"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: ["ran `drtool restore --plan restore-plans/dns-certs-restore.yaml`"]
    )
    secrets: dict[str, str] = dataclasses.field(default_factory=dict)  # namespace/name -> uid, of those deleted

    @staticmethod
    def _path(ref: str) -> str:
        namespace, name = ref.split("/", 1)
        return f"/api/v1/namespaces/{namespace}/secrets/{name}"

    def _uid(self, client: KubeClient, ref: str) -> str | None:
        response = client.request("GET", self._path(ref), ok=(200, 404))
        return response.json()["metadata"]["uid"] if response.status == 200 else None

    def inject(self, client: KubeClient) -> None:
        for ref in issuer_secrets(client, self.cluster_resource_namespace):
            uid = self._uid(client, ref)
            if uid is not None:
                self.secrets[ref] = uid
                client.request("DELETE", self._path(ref), ok=(200, 202, 404))
        update = dns.update.UpdateMessage(f"{self.zone}.", **self.tsig)
        for name in self.names:
            update.delete(name)
        response = dns.query.tcp(update, self.dns_host, port=self.dns_port, timeout=30)
        if response.rcode() != dns.rcode.NOERROR:
            raise SourceError(f"drill: removing records from {self.zone}: {dns.rcode.to_text(response.rcode())}")

    def resolving(self) -> list[str]:
        """The removed names that still have an answer at the zone's server."""
        out = []
        for name in self.names:
            fqdn = dns.name.from_text(name, dns.name.from_text(self.zone))
            query = dns.message.make_query(fqdn, "ANY")
            answer = dns.query.tcp(query, self.dns_host, port=self.dns_port, timeout=10)
            if answer.rcode() == dns.rcode.NOERROR and answer.answer:
                out.append(name)
        return out

    def _left(self, client: KubeClient) -> list[str]:
        """The deleted Secrets still there as they were (a Secret cert-manager made anew, e.g. a new ACME
        account key, has another uid: the one the issuer had is gone all the same)."""
        return [ref for ref, uid in self.secrets.items() if self._uid(client, ref) == uid]

    def detected(self, client: KubeClient) -> bool:
        """Every issuer Secret gone, and none of the names resolves."""
        return not self._left(client) and not self.resolving()

    def pending(self, client: KubeClient) -> str:
        return f"still there: Secrets {self._left(client) or 'none'}, names resolving {self.resolving() or 'none'}"
