"""A cluster's failure domain read out of its objects: what dies with the cluster.

One reader per kind of object (Nodes, ServiceCIDRs, Services, Ingresses, CoreDNS's ConfigMap), so the same
facts come from a live cluster (the kubernetes plugin lists these objects, plugins/kubernetes/facts.py) and
from a backup another tool made (``drtool import velero`` reads them out of Velero's tarball). The facts are
recorded in the backup manifest so the independence analysis can judge every dependency of a restore
against them (docs/independence.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]
_COREDNS_ZONE = re.compile(r"^\s*kubernetes\s+(\S+)", re.MULTILINE)
DEFAULT_DNS_SUFFIX = "cluster.local"


class Facts:
    """Failure-domain lists (merged across plugins by the core) and where each value came from."""

    def __init__(self, source: str = "") -> None:
        self.values: dict[str, list[str]] = {}
        self.evidence: dict[str, str] = {}
        self.source = source  # appended to every evidence line: " (in Velero backup nightly)"

    def add(self, key: str, value: str | None, evidence: str) -> None:
        if not value:
            return
        bucket = self.values.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)
            self.evidence.setdefault(key, evidence + self.source)

    def domain(self) -> dict[str, list[str]]:
        return {k: sorted(v) for k, v in sorted(self.values.items())}


def nodes(facts: Facts, items: Iterable[Obj]) -> None:
    for node in items:
        name = node["metadata"]["name"]
        for addr in (node.get("status") or {}).get("addresses") or []:
            facts.add("node_addresses", addr.get("address"), f"node {name} {addr.get('type')}")
        spec = node.get("spec") or {}
        for cidr in spec.get("podCIDRs") or [spec.get("podCIDR")]:
            facts.add("pod_cidrs", cidr, f"node {name} spec.podCIDRs")


def service_cidrs(facts: Facts, items: Iterable[Obj]) -> None:
    for cidr_obj in items:
        for cidr in (cidr_obj.get("spec") or {}).get("cidrs") or []:
            facts.add("service_cidrs", cidr, f"ServiceCIDR {cidr_obj['metadata']['name']}")


def services(facts: Facts, items: Iterable[Obj]) -> set[str]:
    """Facts from Services (API and DNS addresses, LoadBalancer ingress); returns the ``ns/name`` of
    Services with a selector, whose Endpoints are derived data the backup skips."""
    with_selector: set[str] = set()
    for svc in items:
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


def _lb_ingress(facts: Facts, obj: Obj, what: str, key: str) -> None:
    for ing in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        facts.add(key, ing.get("ip"), f"{what} status.loadBalancer")
        facts.add(key, ing.get("hostname"), f"{what} status.loadBalancer")


def ingresses(facts: Facts, items: Iterable[Obj]) -> None:
    for ing in items:
        what = f"Ingress {ing['metadata']['namespace']}/{ing['metadata']['name']}"
        spec = ing.get("spec") or {}
        for rule in spec.get("rules") or []:
            facts.add("ingress_hosts", rule.get("host"), f"{what} spec.rules")
        for tls in spec.get("tls") or []:
            for host in tls.get("hosts") or []:
                facts.add("ingress_hosts", host, f"{what} spec.tls")
        _lb_ingress(facts, ing, what, "ingress_addresses")


def dns_suffix(facts: Facts, coredns: Obj | None) -> None:
    """The cluster domain from CoreDNS's Corefile (``kubernetes cluster.local ...``), else the default."""
    match = _COREDNS_ZONE.search(((coredns or {}).get("data") or {}).get("Corefile", ""))
    if match:
        facts.add("cluster_dns_suffixes", match.group(1).rstrip("."), "ConfigMap kube-system/coredns Corefile")
    else:
        facts.add("cluster_dns_suffixes", DEFAULT_DNS_SUFFIX, "default (no CoreDNS Corefile found)")


def from_objects(objects: dict[str, list[Obj]], source: str = "") -> Facts:
    """The facts of a backup's objects, by type key (``nodes``, ``services``, ``ingresses.networking.k8s.io``,
    ...): what a live cluster's listing would give, as far as the backup holds those types."""
    facts = Facts(source)
    nodes(facts, objects.get("nodes", []))
    service_cidrs(facts, objects.get("servicecidrs.networking.k8s.io", []))
    services(facts, objects.get("services", []))
    ingresses(facts, objects.get("ingresses.networking.k8s.io", []))
    configmaps = objects.get("configmaps", [])
    coredns = next((c for c in configmaps if (c["metadata"].get("namespace"), c["metadata"]["name"]) == _COREDNS), None)
    dns_suffix(facts, coredns)
    return facts


_COREDNS = ("kube-system", "coredns")
