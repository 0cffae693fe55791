"""The living lab's node for the pods drtool's plan checks create: ``python -m drtool_lab.node``.

kwok moves every other pod through its life without running anything; the pods labelled
``drtool.dev/check`` (the ``training-resumes`` check's trainer Job) are left to this node, which runs their
containers as local processes with the pod's own environment and reports their exit and termination
message in the pod's status (lab/node.py). Its identity may read Secrets (``envFrom``) and write
pod status anywhere, as a kubelet's does for its pods.
"""

from __future__ import annotations

import dataclasses
import sys

from drtool_lab.components.cluster_process import ClusterProcess

from drtool.servers.provision import Provision, pypi


@dataclasses.dataclass
class LabNodeController(ClusterProcess):
    kind = "lab-node"
    identity = ("drtool-lab-node", ("system:masters",))

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [pypi("python", "drtool", lambda: sys.executable)]  # drtool's own interpreter runs the pods

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/healthz"

    def argv(self) -> list[str]:
        lab_dir = self.path.parent.parent  # <labs root>/<lab>/<component>: what DRTOOL_LAB_DIR names
        return [sys.executable, "-m", "drtool_lab.node", "--kubeconfig", str(self.kubeconfig_path),
                "--health-port", str(self.health_port), "--lab-dir", str(lab_dir)]  # fmt: skip
