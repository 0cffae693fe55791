"""kube-scheduler (upstream Kubernetes, built in ``gomod/lab``): binds the lab's Pods to its kwok nodes with
the real scheduling rules (node selectors and affinity, taints and tolerations, resource requests against
each node's allocatable ``cpu``, ``memory`` and ``nvidia.com/gpu``), so a restored workload lands where its
spec says or stays Pending for the reason a real cluster would give.

Its own identity (``system:kube-scheduler``, bound by the API server's bootstrap RBAC), as kubeadm runs it;
no leader election (one instance per lab).
"""

from __future__ import annotations

import dataclasses

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.gomods import lab_binary


@dataclasses.dataclass
class KubeScheduler(ClusterProcess):
    kind = "kube-scheduler"
    binaries = ("kube-scheduler",)
    identity = ("system:kube-scheduler", ())

    def argv(self) -> list[str]:
        flags = self.kube_component_flags()
        return [str(lab_binary("kube-scheduler")), *(f"--{k}={v}" for k, v in flags.items())]
