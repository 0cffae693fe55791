"""KubeRay's operator (``github.com/ray-project/kuberay/ray-operator``, built in ``gomod/kuberay``) running
against the lab: opt-in, `drtool lab up --with kuberay`.

It does what KubeRay does in production: a RayJob gets a RayCluster (head and worker pods, a head Service) and
then a submitter Job; a suspended RayJob gets nothing, and suspending a running one deletes its cluster. kwok
runs the pods, so a head pod is Running but no Ray process answers: a RayJob's cluster and pods appear, its
Ray job never reports a result. That is enough for what the lab uses it for: showing that a restored RayJob
creates nothing until a plan releases it (tests/plugins/test_kuberay_holds.py).

Installed as KubeRay's manifests would install it, from the same pinned module: its CRDs before it starts (it
watches RayJob, RayCluster and RayService). Its admission webhooks stay off (``ENABLE_WEBHOOKS`` unset, its
default), leader election off, metrics off, health probes on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.gomods import lab_binary


@dataclasses.dataclass
class KubeRayOperator(ClusterProcess):
    kind = "kuberay"
    binaries = ("ray-operator",)
    identity = ("drtool-lab-kuberay", ("system:masters",))

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/readyz"

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient, install_crds

        install_crds(KubeClient(self.access()), ["kuberay"])

    def argv(self) -> list[str]:
        return [
            str(lab_binary("ray-operator")),
            f"--kubeconfig={self.kubeconfig_path}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            "--metrics-addr=0",
            "--enable-leader-election=false",
            "--log-stdout-encoder=console",
        ]
