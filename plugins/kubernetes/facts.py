"""The source cluster's failure domain, as far as its API tells: what dies with the cluster.

These facts are recorded in the backup manifest so the independence analysis can later judge every
dependency of a restore against them (docs/independence.md). They come from cheap reads that ignore the backup's
filters — the failure domain is a property of the cluster, not of what was selected — and each read is
best effort: an identity without permission to list nodes still gets a backup, with fewer facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from drtool.kube.client import ApiError, KubeClient

_COREDNS_ZONE = re.compile(r"^\s*kubernetes\s+(\S+)", re.MULTILINE)
DEFAULT_DNS_SUFFIX = "cluster.local"


class Facts:
    """Failure-domain lists (merged across plugins by the core) and where each value came from."""

    def __init__(self) -> None:
        self.values: dict[str, list[str]] = {}
        self.evidence: dict[str, str] = {}

    def add(self, key: str, value: str | None, evidence: str) -> None:
        if not value:
            return
        bucket = self.values.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)
            self.evidence.setdefault(key, evidence)

    def domain(self) -> dict[str, list[str]]:
        return {k: sorted(v) for k, v in sorted(self.values.items())}


def _items(client: KubeClient, path: str, page_size: int) -> Iterator[dict[str, Any]]:
    """Every object at ``path``; nothing when the type does not exist or the identity may not list it."""
    try:
        for page in client.list_pages(path, limit=page_size):
            yield from page.get("items") or []
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise


def api_server(facts: Facts, client: KubeClient) -> None:
    facts.add("kubernetes_api_endpoints", client.server, "kubeconfig server")
    facts.add("kubernetes_api_hosts", client.host, "kubeconfig server")


def nodes(facts: Facts, client: KubeClient, page_size: int) -> None:
    for node in _items(client, "/api/v1/nodes", page_size):
        name = node["metadata"]["name"]
        for addr in (node.get("status") or {}).get("addresses") or []:
            facts.add("node_addresses", addr.get("address"), f"node {name} {addr.get('type')}")
        spec = node.get("spec") or {}
        for cidr in spec.get("podCIDRs") or [spec.get("podCIDR")]:
            facts.add("pod_cidrs", cidr, f"node {name} spec.podCIDRs")


def service_cidrs(facts: Facts, client: KubeClient, page_size: int) -> None:
    for cidr_obj in _items(client, "/apis/networking.k8s.io/v1/servicecidrs", page_size):
        for cidr in (cidr_obj.get("spec") or {}).get("cidrs") or []:
            facts.add("service_cidrs", cidr, f"ServiceCIDR {cidr_obj['metadata']['name']}")


def services(facts: Facts, client: KubeClient, page_size: int) -> set[str]:
    """Facts from Services (API and DNS addresses, LoadBalancer ingress); returns the ``ns/name`` of
    Services with a selector, whose Endpoints are derived data the backup skips."""
    with_selector: set[str] = set()
    for svc in _items(client, "/api/v1/services", page_size):
        meta, spec = svc["metadata"], svc.get("spec") or {}
        key = f"{meta['namespace']}/{meta['name']}"
        if spec.get("selector"):
            with_selector.add(key)
        if key == "default/kubernetes":
            facts.add("kubernetes_service_ips", spec.get("clusterIP"), "Service default/kubernetes")
        elif key == "kube-system/kube-dns":
            facts.add("cluster_dns_ips", spec.get("clusterIP"), "Service kube-system/kube-dns")
        for ip in spec.get("externalIPs") or []:
            facts.add("loadbalancer_addresses", ip, f"Service {key} spec.externalIPs")
        _lb_ingress(facts, svc, f"Service {key}", "loadbalancer_addresses")
    return with_selector


def _lb_ingress(facts: Facts, obj: dict[str, Any], what: str, key: str) -> None:
    for ing in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        facts.add(key, ing.get("ip"), f"{what} status.loadBalancer")
        facts.add(key, ing.get("hostname"), f"{what} status.loadBalancer")


def ingresses(facts: Facts, client: KubeClient, page_size: int) -> None:
    for ing in _items(client, "/apis/networking.k8s.io/v1/ingresses", page_size):
        what = f"Ingress {ing['metadata']['namespace']}/{ing['metadata']['name']}"
        spec = ing.get("spec") or {}
        for rule in spec.get("rules") or []:
            facts.add("ingress_hosts", rule.get("host"), f"{what} spec.rules")
        for tls in spec.get("tls") or []:
            for host in tls.get("hosts") or []:
                facts.add("ingress_hosts", host, f"{what} spec.tls")
        _lb_ingress(facts, ing, what, "ingress_addresses")


def dns_suffix(facts: Facts, client: KubeClient) -> None:
    """The cluster domain from CoreDNS's Corefile (``kubernetes cluster.local ...``), else the default."""
    try:
        cm = client.get("/api/v1/namespaces/kube-system/configmaps/coredns")
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise
        cm = {}
    match = _COREDNS_ZONE.search((cm.get("data") or {}).get("Corefile", ""))
    if match:
        facts.add("cluster_dns_suffixes", match.group(1).rstrip("."), "ConfigMap kube-system/coredns Corefile")
    else:
        facts.add("cluster_dns_suffixes", DEFAULT_DNS_SUFFIX, "default (no CoreDNS Corefile found)")


def collect(client: KubeClient, page_size: int) -> tuple[Facts, set[str]]:
    """All facts, and the Services whose Endpoints are derived (see ``services``)."""
    facts = Facts()
    api_server(facts, client)
    nodes(facts, client, page_size)
    service_cidrs(facts, client, page_size)
    with_selector = services(facts, client, page_size)
    ingresses(facts, client, page_size)
    dns_suffix(facts, client)
    return facts, with_selector
