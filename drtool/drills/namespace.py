"""Scenario ``namespace-deleted``: a team namespace deleted (`kubectl delete ns team-x`), everything in it
gone with it; recovered by restore-plans/namespace-restore.yaml from a backup of that namespace, judged by
its checks (workloads serving, the namespace's queue admitting a probe job)."""

from __future__ import annotations

import dataclasses

from drtool.kube.client import KubeClient


@dataclasses.dataclass
class NamespaceDeleted:
    namespace: str
    scenario: str = "namespace-deleted"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: ["ran `drtool restore --plan restore-plans/namespace-restore.yaml`"]
    )

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}"

    def inject(self, client: KubeClient) -> None:
        client.request("DELETE", self.path, ok=(200, 202))

    def detected(self, client: KubeClient) -> bool:
        """The namespace controller finished: the namespace and everything in it are gone."""
        return client.request("GET", self.path, ok=(200, 404)).status == 404

    def pending(self, client: KubeClient) -> str:
        """The namespace controller's conditions: what it could not delete yet, and why."""
        status = client.request("GET", self.path, ok=(200, 404)).json().get("status") or {}
        held = [
            f"{c.get('type')}: {c.get('message')}" for c in status.get("conditions") or [] if c.get("status") == "True"
        ]
        return "; ".join(held) or f"namespace {self.namespace} is {status.get('phase', 'gone')}"
