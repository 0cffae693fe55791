"""Which Kubernetes objects the plugin keeps, and which it leaves out on purpose (with the reason)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]

ISSUERS = "issuers.cert-manager.io"
CLUSTER_ISSUERS = "clusterissuers.cert-manager.io"
CERTIFICATES = "certificates.cert-manager.io"
CERTIFICATE_REQUESTS = "certificaterequests.cert-manager.io"
DNS_ENDPOINTS = "dnsendpoints.externaldns.k8s.io"
SECRETS = "secrets"
CONFIGMAPS = "configmaps"
SERVICES = "services"
DEPLOYMENTS = "deployments.apps"
NAMESPACES = "namespaces"
CRDS = "customresourcedefinitions.apiextensions.k8s.io"
INGRESSES = "ingresses.networking.k8s.io"

CERT_MANAGER = (ISSUERS, CLUSTER_ISSUERS, CERTIFICATES)
NOT_BACKED_UP = {
    CERTIFICATE_REQUESTS: "one-shot issuance requests; a restored one with no matching Secret history would "
    "start a new issuance (cert-manager backup docs)",
    "orders.acme.cert-manager.io": "an ACME order in flight is bound to the old account session and nonce; "
    "restoring it re-runs the order against the CA's rate limits",
    "challenges.acme.cert-manager.io": "ACME challenges are per-order and expire within hours; restored ones "
    "would publish stale DNS01/HTTP01 records",
}
COREDNS_NAMESPACE = "kube-system"
COREDNS_CONFIGMAPS = ("coredns", "coredns-custom")  # the Corefile and the common import of custom server blocks
KUBE_DNS = "kube-dns"
# applied by this plugin itself, not by the kubernetes plugin's restore (kube-dns keeps its ClusterIP,
# ExternalDNS may be held at upsert-only)
OWN_APPLY = (SERVICES, DEPLOYMENTS)


def secret_refs(obj: Obj, cluster_resource_namespace: str) -> Iterator[tuple[str, str]]:
    """(namespace, name) of every Secret a cert-manager object names: ``spec.secretName`` of a Certificate,
    ``spec.ca.secretName`` and every ``*SecretRef``/``secretRef`` (ACME account keys ``privateKeySecretRef``,
    DNS01 solver credentials, Vault and Venafi auth) of an (Cluster)Issuer. A ClusterIssuer's Secrets live in
    cert-manager's cluster resource namespace."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or cluster_resource_namespace
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Certificate":
        if spec.get("secretName"):
            yield namespace, spec["secretName"]
        return
    if isinstance(spec.get("ca"), dict) and spec["ca"].get("secretName"):
        yield namespace, spec["ca"]["secretName"]
    yield from ((namespace, name) for name in _refs(spec))


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key.lower().endswith("secretref") and isinstance(item, dict) and item.get("name"):
                yield str(item["name"])
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def is_external_dns(deployment: Obj) -> bool:
    """A Deployment running ExternalDNS: its image, or the registry owner flag in its arguments."""
    for c in _containers(deployment):
        if "external-dns" in str(c.get("image", "")) or any("--txt-owner-id" in str(a) for a in c.get("args") or []):
            return True
    return False


def _containers(deployment: Obj) -> list[Obj]:
    return (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
