"""Scenario ``kueue-config-deleted``: every ClusterQueue and ResourceFlavor deleted (a bad GitOps sync, a
`kubectl delete -f` of the wrong folder); recovered by restore-plans/kueue-quotas-only.yaml, judged by its
``kueue-admits`` check (a probe job admitted again)."""

from __future__ import annotations

import dataclasses

from drtool.kube.client import KubeClient
from drtool.kube.readings import items

API = "/apis/kueue.x-k8s.io/v1beta2"
KINDS = ("clusterqueues", "resourceflavors")  # queues first: a flavor in use waits for its queues to go


@dataclasses.dataclass
class KueueConfigDeleted:
    scenario: str = "kueue-config-deleted"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: ["ran `drtool restore --plan restore-plans/kueue-quotas-only.yaml`"]
    )
    deleted: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def _names(self, client: KubeClient, kind: str) -> list[str]:
        return [o["metadata"]["name"] for o in items(client, f"{API}/{kind}")]

    def inject(self, client: KubeClient) -> None:
        for kind in KINDS:
            self.deleted[kind] = self._names(client, kind)
            for name in self.deleted[kind]:
                client.request("DELETE", f"{API}/{kind}/{name}", ok=(200, 202, 404))

    def detected(self, client: KubeClient) -> bool:
        """Kueue's configuration is gone: no ClusterQueue and no ResourceFlavor left (finalizers done)."""
        return not any(self._names(client, kind) for kind in KINDS)

    def pending(self, client: KubeClient) -> str:
        left = {kind: self._names(client, kind) for kind in KINDS}
        return "still there: " + "; ".join(f"{kind} {', '.join(names)}" for kind, names in left.items() if names)
