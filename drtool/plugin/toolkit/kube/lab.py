"""A lab control plane seeded with an AI platform's objects: the source and target of the plugins that
read a Kubernetes API (kubernetes, kueue, etcd's lab seed).

Those plugins read the same cluster, so the seed is done once per lab: a marker in the lab's folder
records how many objects it holds, and seeding again for the same scale costs nothing.
"""

from __future__ import annotations

import json
from typing import Any

from drtool.lab.components.kube_apiserver import KubeApiserver
from drtool.lab.lab import Lab

KINDS: tuple[str, ...] = ("etcd", "kube-apiserver")
OBJECTS_PER_SCALE = 250  # scale 1 is the base seed (about 200 objects); scale N > 1 about N * 250 objects


def _apiserver(lab: Lab) -> KubeApiserver:
    lab.up(KINDS)
    server = lab.first("kube-apiserver")
    assert isinstance(server, KubeApiserver)
    return server


def seeded_cluster(lab: Lab, scale: int = 1) -> dict[str, Any]:
    """Seed the lab's API server (once per scale); the source mapping reads with the read-only identity."""
    from drtool.lab import kube_seed  # loads YAML and the fixtures: only when seeding

    server = _apiserver(lab)
    objects = 0 if scale <= 1 else scale * OBJECTS_PER_SCALE
    marker = lab.root / "kube-seed.json"
    done = json.loads(marker.read_text()).get("objects", -1) if marker.exists() else -1
    if done < objects:
        result = kube_seed.seed(server.access(), objects)
        marker.write_text(json.dumps({"objects": objects, "total": result.total}))
    return {"kubeconfig": str(server.readonly_kubeconfig)}


def cluster_target(lab: Lab) -> dict[str, Any]:
    """The lab's (empty) API server, written to with the admin identity."""
    return {"kubeconfig": str(_apiserver(lab).admin_kubeconfig)}


class SeededCluster:
    """``LabSupport`` of a plugin that reads a Kubernetes API: the seeded lab control plane as its source
    (Kueue CRDs, GPU flavors, a cohort tree, team queues, workloads...), an empty lab API server as target."""

    kinds = KINDS

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        return seeded_cluster(lab, scale)

    def target(self, lab: Lab) -> dict[str, Any]:
        return cluster_target(lab)
