"""What the audit reads from a live cluster: workloads, disruption budgets and nodes, by GET and LIST only.

Everything here is read-only, so the backup identity (get/list/watch) is enough. ``namespaces`` narrows the
namespaced kinds to some namespaces (nodes are the cluster's, always read whole).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection

Obj = dict[str, Any]
KINDS = {
    "deployments": "/apis/apps/v1/deployments",
    "statefulsets": "/apis/apps/v1/statefulsets",
    "jobs": "/apis/batch/v1/jobs",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
}
NODES = "/api/v1/nodes"


@dataclasses.dataclass
class ClusterView:
    server: str
    namespaces: tuple[str, ...]  # empty: every namespace
    objects: dict[str, list[Obj]]  # kind (a KINDS key) -> objects
    nodes: list[Obj]

    @property
    def scope(self) -> str:
        return f"{self.server} ({', '.join(self.namespaces) if self.namespaces else 'all namespaces'})"


def read_cluster(conn: Connection, namespaces: Sequence[str] = ()) -> ClusterView:
    """LIST the kinds the checklist is about (in ``namespaces`` when given) and the nodes."""
    client = KubeClient(conn)

    def items(path: str) -> list[Obj]:
        return [i for page in client.list_pages(path) for i in page.get("items") or []]

    objects: dict[str, list[Obj]] = {}
    for kind, path in KINDS.items():
        if namespaces:
            group, _, plural = path.rpartition("/")
            objects[kind] = [o for ns in namespaces for o in items(f"{group}/namespaces/{ns}/{plural}")]
        else:
            objects[kind] = items(path)
    return ClusterView(client.server, tuple(namespaces), objects, items(NODES))


def name_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def pod_spec(obj: Obj) -> Obj:
    """The pod template's spec of a Deployment, StatefulSet or Job."""
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def gpus(obj: Obj) -> int:
    """GPUs a workload's pod asks for (limits, then requests, over its containers)."""
    total = 0
    for c in pod_spec(obj).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU) or 0
        total += int(value)
    return total


GPU = "nvidia.com/gpu"
