"""The kueue plugin's ``LabSupport``: the same seeded lab cluster the kubernetes plugin uses (Kueue CRDs,
GPU flavors, a cohort tree, per-team ClusterQueues and LocalQueues), seeded once for both."""

from __future__ import annotations

from typing import Any

from drtool.lab.lab import Lab

from ..kubernetes.lab import KINDS, cluster_target, seeded_cluster


class KueueLab:
    kinds = KINDS

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        return seeded_cluster(lab, scale)

    def target(self, lab: Lab) -> dict[str, Any]:
        return cluster_target(lab)
