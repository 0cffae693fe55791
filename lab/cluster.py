"""A lab cluster seeded with an AI platform's objects: the source and target of the plugins that read a
Kubernetes API (kubernetes, kueue, helm, dns-certs, etcd's lab seed).

The cluster is the living lab (docs/lab.md): controllers, a scheduler, kwok's GPU nodes, Kueue and
cert-manager run, so a backup holds what a real cluster holds (ReplicaSets and Pods of the seeded
Deployments, Kueue's Workloads, cert-manager's CertificateRequests, the webhooks Kueue registered) and a
restore is judged by a platform that acts on what it restored. A lab already brought up bare
(`drtool lab up --bare`: an API server and no controller-manager) is kept bare: seeded and restored into as
it is.

Those plugins read the same cluster, so the seed is done once per lab: a marker in the lab's folder
records how many objects it holds, and seeding again for the same scale costs nothing.
"""

from __future__ import annotations

import json
from typing import Any

from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.gomods import KUBE_VERSION
from drtool_lab.lab import BARE_KINDS, LIVING_KINDS, Lab

KINDS: tuple[str, ...] = LIVING_KINDS
OBJECTS_PER_SCALE = 250  # scale 1 is the base seed (about 200 objects); scale N > 1 about N * 250 objects


def cluster_kinds(lab: Lab) -> tuple[str, ...]:
    """The living lab's kinds, unless the lab already has an API server without a controller-manager, or
    runs another Kubernetes release (whose labs are bare: docs/lab.md, "Another Kubernetes version")."""
    bare = lab.first("kube-apiserver") is not None and lab.first("kube-controller-manager") is None
    return BARE_KINDS if bare or lab.kubernetes != KUBE_VERSION else LIVING_KINDS


def apiserver(lab: Lab) -> KubeApiserver:
    """Start the lab's cluster (what is not running yet) and return its API server."""
    lab.up(cluster_kinds(lab))
    server = lab.first("kube-apiserver")
    assert isinstance(server, KubeApiserver)
    return server


def seeded_cluster(lab: Lab, scale: int = 1) -> dict[str, Any]:
    """Seed the lab's API server (once per scale); the source mapping reads with the read-only identity."""
    from drtool_lab import kube_seed  # loads YAML and the fixtures: only when seeding

    server = apiserver(lab)
    objects = 0 if scale <= 1 else scale * OBJECTS_PER_SCALE
    marker = lab.root / "kube-seed.json"
    done = json.loads(marker.read_text()).get("objects", -1) if marker.exists() else -1
    if done < objects:
        result = kube_seed.seed(server.access(), objects)
        if lab.first("kueue") is not None:
            kube_seed.wait_queue_verdicts(kube_seed.KubeClient(server.access()))
        marker.write_text(json.dumps({"objects": objects, "total": result.total}))
    return {"kubeconfig": str(server.readonly_kubeconfig)}


def cluster_target(lab: Lab) -> dict[str, Any]:
    """The lab's (empty) cluster, written to with the admin identity."""
    return {"kubeconfig": str(apiserver(lab).admin_kubeconfig)}


class SeededCluster:
    """``LabSupport`` of a plugin that reads a Kubernetes API: the seeded living cluster as its source
    (Kueue CRDs, GPU flavors, a cohort tree, team queues, workloads...), an empty living cluster as target."""

    kinds = KINDS

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        return seeded_cluster(lab, scale)

    def target(self, lab: Lab) -> dict[str, Any]:
        return cluster_target(lab)
