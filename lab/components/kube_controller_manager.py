"""kube-controller-manager (upstream Kubernetes, built in ``gomod/lab``) running the controllers a restore
meets first: the garbage collector (deletes dependents whose owner is gone: a restore that loses or remaps
owner UIDs wrongly loses objects to it), namespace deletion, Deployments and ReplicaSets, StatefulSets,
Jobs, Endpoints and EndpointSlices of Services with a selector (what a backup must leave out), the
ServiceAccount controllers (every namespace's ``default`` ServiceAccount and its tokens), and node
lifecycle (it lifts the ``not-ready`` taint admission puts on every new Node once kwok reports it Ready,
and taints nodes whose heartbeats stop), and PVC protection (without it a deleted namespace holding a PVC
stays Terminating forever: the drill `namespace-deleted` deletes one).

As kubeadm runs it: its own identity (``system:kube-controller-manager``) with each controller acting as its
own ServiceAccount in ``kube-system`` (``--use-service-account-credentials``), bound by the API server's
bootstrap RBAC roles; it signs ServiceAccount tokens with the API server's key and publishes the cluster CA.
No leader election (one instance per lab).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.gomods import lab_binary

from drtool.servers.component import Component

CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "persistentvolumeclaim-protection-controller",  # lifts a deleted PVC's finalizer: namespaces can be deleted
)


@dataclasses.dataclass
class KubeControllerManager(ClusterProcess):
    kind = "kube-controller-manager"
    binaries = ("kube-controller-manager",)
    identity = ("system:kube-controller-manager", ())
    service_account_key: str = ""  # the API server's token-signing key (tokens it mints must verify there)

    def link(self, peers: Mapping[str, Component]) -> None:
        super().link(peers)
        server = peers[self.apiserver_component]
        assert isinstance(server, KubeApiserver)
        self.service_account_key = str(server.service_account_keys.key)

    def argv(self) -> list[str]:
        flags = self.kube_component_flags() | {
            "controllers": ",".join(CONTROLLERS),
            "use-service-account-credentials": "true",
            "service-account-private-key-file": self.service_account_key,
            "root-ca-file": self.cluster_ca,
        }
        return [str(lab_binary("kube-controller-manager")), *(f"--{k}={v}" for k, v in flags.items())]
