"""The source cluster's failure domain, as far as its API tells: what dies with the cluster.

The readers live in ``drtool.kube.domain_facts`` (an imported Velero backup's objects go through the same
ones); this module lists what they read. The reads ignore the backup's filters — the failure domain is a
property of the cluster, not of what was selected — and each is best effort: an identity without permission to
list nodes still gets a backup, with fewer facts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from drtool.kube import domain_facts
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.domain_facts import Facts


def _items(client: KubeClient, path: str, page_size: int) -> Iterator[dict[str, Any]]:
    """Every object at ``path``; nothing when the type does not exist or the identity may not list it."""
    try:
        for page in client.list_pages(path, limit=page_size):
            yield from page.get("items") or []
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise


def _coredns(client: KubeClient) -> dict[str, Any] | None:
    try:
        return client.get("/api/v1/namespaces/kube-system/configmaps/coredns")
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise
        return None


def selector_services(client: KubeClient, page_size: int) -> set[str]:
    """The Services whose Endpoints are derived (``domain_facts.services``), without the other facts: the
    follower reads them again at each discovery, and its full backup records the facts."""
    return domain_facts.services(Facts(), _items(client, "/api/v1/services", page_size))


def collect(client: KubeClient, page_size: int) -> tuple[Facts, set[str]]:
    """All facts, and the Services whose Endpoints are derived (``domain_facts.services``)."""
    facts = Facts()
    facts.add("kubernetes_api_endpoints", client.server, "kubeconfig server")
    facts.add("kubernetes_api_hosts", client.host, "kubeconfig server")
    domain_facts.nodes(facts, _items(client, "/api/v1/nodes", page_size))
    domain_facts.service_cidrs(facts, _items(client, "/apis/networking.k8s.io/v1/servicecidrs", page_size))
    with_selector = domain_facts.services(facts, _items(client, "/api/v1/services", page_size))
    domain_facts.ingresses(facts, _items(client, "/apis/networking.k8s.io/v1/ingresses", page_size))
    domain_facts.dns_suffix(facts, _coredns(client))
    return facts, with_selector
