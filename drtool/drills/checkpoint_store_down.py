"""Scenario ``checkpoint-store-down``: the object store a training run saves its checkpoints to stops while the
run is saving one (an outage, a full disk, a deleted bucket). The save in flight never completes, so the
store is left with complete checkpoints and a torn one, and the run dies on its next write.

Recovered by restore-plans/training-resume.yaml from the latest backup into a standby location (the store
that stopped is not needed), judged by its ``training-resumes`` check: the run resumes from the last
COMPLETE checkpoint the backup holds, never the torn one, bit for bit; the drill records the steps lost
(``rpo_steps``) and the training time since that checkpoint was written (docs/drills.md).

A store is not a Kubernetes object: how to stop it is the caller's (``stop``: the lab stops its MinIO). The
failure shows when nothing answers at the store's endpoint any more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from drtool.kube.client import KubeClient
from drtool.probe import reachable


@dataclasses.dataclass
class CheckpointStoreDown:
    endpoint: str  # the checkpoint store's S3 endpoint
    stop: Callable[[], None]  # stops that store (never called before the drill's guard allowed the cluster)
    scenario: str = "checkpoint-store-down"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: [
            "pointed the checkpoints step at a standby location",
            "ran `drtool restore --plan restore-plans/training-resume.yaml`",
        ]
    )

    def inject(self, client: KubeClient) -> None:
        self.stop()

    def detected(self, client: KubeClient) -> bool:
        """Nothing answers at the store's endpoint: every read and write of the run's checkpoints fails."""
        return not reachable(self.endpoint, 2.0)

    def pending(self, client: KubeClient) -> str:
        return f"the checkpoint store at {self.endpoint} still accepts connections"
