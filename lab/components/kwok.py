"""kwok (``sigs.k8s.io/kwok``, built in ``gomod/lab``): the lab's nodes and kubelets, without containers.

kwok keeps fake Nodes Ready (heartbeats, leases) and moves the Pods bound to them through their life:
Running once scheduled, Succeeded when a Job owns them, gone when deleted. No container runs, so a lab
with GPU pools costs megabytes, and the real scheduler still decides where every Pod goes.

The node pools are data (``lab/node_pools.yaml``): one pool per GPU ResourceFlavor of the seed,
whose nodes carry the flavor's labels and taints (taken from the seed's own flavor template, so they cannot
drift apart) and the machine type's ``cpu``, ``memory`` and ``nvidia.com/gpu`` capacity, and a small CPU
pool. kwok manages only the nodes annotated ``kwok.x-k8s.io/node: fake`` that the lab creates. Its stages
(node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete, what ``kwokctl`` uses)
are read from the pinned kwok module, the same version as the binary.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import yaml
from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.kube_apiserver import apply
from drtool_lab.gomods import lab_binary

Obj = dict[str, Any]
MANAGED = ("kwok.x-k8s.io/node", "fake")
STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
CHECK_POD_STAGES = ("pod-ready.yaml", "pod-complete.yaml")
POD_CIDR = "10.244.0.0/16"
NODE_LEASE_SECONDS = 40


@functools.cache
def node_pools() -> list[dict[str, Any]]:
    """The pools of ``node_pools.yaml``, each with its nodes' full ``labels``, ``taints`` and ``capacity``."""
    from drtool_lab import kube_seed

    pools = yaml.safe_load(Path(__file__).parent.parent.joinpath("node_pools.yaml").read_text())["pools"]
    out = []
    for pool in pools:
        labels: dict[str, str] = {}
        taints: list[Obj] = []
        if "flavor" in pool:
            accelerator, instance = kube_seed.GPU_FLAVORS[pool["flavor"]]
            flavor = kube_seed.render("flavor", name=pool["flavor"], accelerator=accelerator, instance=instance)[0]
            labels, taints = dict(flavor["spec"]["nodeLabels"]), list(flavor["spec"].get("nodeTaints", []))
        name = pool.get("name") or labels["cloud.google.com/gke-nodepool"]
        labels |= pool.get("labels", {})
        out.append({**pool, "name": name, "labels": labels, "taints": taints})
    return out


def nodes() -> list[Obj]:
    """Every Node of every pool, as the lab creates it (kwok fills in conditions and addresses)."""
    out = []
    for pool in node_pools():
        for i in range(pool["nodes"]):
            name = f"{pool['name']}-{i}"
            labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
            meta = {"name": name, "annotations": dict([MANAGED]), "labels": labels | pool["labels"]}
            resources = {k: str(v) for k, v in pool["capacity"].items()}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": meta,
                    "spec": {"taints": pool["taints"]},
                    "status": {"capacity": resources, "allocatable": resources},
                }
            )
    return out


def _leave_checks_alone(path: str, text: str) -> str:
    """kwok would run a plan check's pod to Succeeded without running it: its pod stages skip the pods
    labelled ``drtool.dev/check``, which the lab's node runs (lab/node.py); deleting them stays kwok's."""
    if not path.endswith(CHECK_POD_STAGES):
        return text
    from drtool_lab.node import SELECTOR

    stages = [doc for doc in yaml.safe_load_all(text) if doc]
    for stage in stages:
        expressions = stage["spec"].setdefault("selector", {}).setdefault("matchExpressions", [])
        expressions.append({"key": f'.metadata.labels["{SELECTOR}"]', "operator": "DoesNotExist"})
    return yaml.safe_dump_all(stages, sort_keys=False)


@dataclasses.dataclass
class KwokController(ClusterProcess):
    kind = "kwok"
    binaries = ("kwok",)
    identity = ("drtool-lab-kwok", ("system:masters",))  # it writes Node and Pod status everywhere

    @property
    def config_path(self) -> Path:
        return self.path / "kwok.yaml"

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/healthz"

    def prepare(self) -> None:
        from drtool_lab import upstream

        stages = [_leave_checks_alone(path, text) for path, text in upstream.module_files("kwok", STAGES)]
        # stages only: a KwokConfiguration in the file would skip kwok's defaulting (its options are flags)
        self.config_path.write_text("\n---\n".join(stages))

    def argv(self) -> list[str]:
        flags = {
            "kubeconfig": self.kubeconfig_path,
            "config": self.config_path,
            "manage-all-nodes": "false",
            "manage-nodes-with-annotation-selector": "=".join(MANAGED),
            "cidr": POD_CIDR,
            "node-lease-duration-seconds": NODE_LEASE_SECONDS,
            "server-address": f"127.0.0.1:{self.health_port}",
        }
        return [str(lab_binary("kwok")), *(f"--{k}={v}" for k, v in flags.items())]

    def started(self) -> None:
        """Create (idempotently) the pools' nodes: kwok picks them up by their annotation."""
        with self.access().session() as session:
            for node in nodes():
                url = f"{self.server}/api/v1/nodes/{node['metadata']['name']}"
                apply(session, url, {k: v for k, v in node.items() if k != "status"})
                apply(session, f"{url}/status", {k: node[k] for k in ("apiVersion", "kind", "metadata", "status")})
