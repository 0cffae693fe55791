"""A cluster's failure domain read out of its objects (``drtool.kube.domain_facts``): the readers the kubernetes
plugin runs on a live cluster's listings and ``drtool import velero`` on a Velero backup's objects."""

from __future__ import annotations

from drtool.kube.domain_facts import from_objects

NODE = {
    "metadata": {"name": "gpu-1"},
    "spec": {"podCIDRs": ["10.244.1.0/24"]},
    "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname", "address": "gpu-1"}]},
}
SERVICES = [
    {"metadata": {"namespace": "default", "name": "kubernetes"}, "spec": {"clusterIP": "10.96.0.1"}},
    {"metadata": {"namespace": "kube-system", "name": "kube-dns"}, "spec": {"clusterIP": "10.96.0.10"}},
    {
        "metadata": {"namespace": "team", "name": "serve"},
        "spec": {"selector": {"app": "serve"}, "externalIPs": ["203.0.113.9"]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.4"}]}},
    },
]
INGRESS = {"metadata": {"namespace": "team", "name": "web"}, "spec": {"rules": [{"host": "chat.example.com"}]}}
COREDNS = {"metadata": {"namespace": "kube-system", "name": "coredns"},
           "data": {"Corefile": ".:53 {\n    kubernetes corp.internal in-addr.arpa {\n    }\n}"}}  # fmt: skip


def test_the_facts_of_a_backup_s_objects_name_their_backup() -> None:
    objects = {
        "nodes": [NODE],
        "services": SERVICES,
        "ingresses.networking.k8s.io": [INGRESS],
        "servicecidrs.networking.k8s.io": [{"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/16"]}}],
        "configmaps": [COREDNS],
    }
    facts = from_objects(objects, " (Velero backup nightly)")
    assert facts.domain() == {
        "cluster_dns_ips": ["10.96.0.10"],
        "cluster_dns_suffixes": ["corp.internal"],
        "ingress_hosts": ["chat.example.com"],
        "kubernetes_service_ips": ["10.96.0.1"],
        "loadbalancer_addresses": ["198.51.100.4", "203.0.113.9"],
        "node_addresses": ["10.0.0.7", "gpu-1"],
        "pod_cidrs": ["10.244.1.0/24"],
        "service_cidrs": ["10.96.0.0/16"],
    }
    assert facts.evidence["node_addresses"] == "node gpu-1 InternalIP (Velero backup nightly)"


def test_a_backup_without_nodes_or_coredns_gives_fewer_facts_and_the_default_suffix() -> None:
    facts = from_objects({"services": SERVICES[:1]})
    assert facts.domain() == {"cluster_dns_suffixes": ["cluster.local"], "kubernetes_service_ips": ["10.96.0.1"]}
    assert facts.evidence["cluster_dns_suffixes"] == "default (no CoreDNS Corefile found)"
