"""cert-manager's controllers (``github.com/cert-manager/cert-manager``, built in ``gomod/lab``).

The module proxy serves cert-manager's main module but not ``cmd/controller``, the separate module that
holds upstream's ``main``; ``gomod/lab/cmd/cert-manager-controller`` is a small main over the served
module's own controller packages (docs/lab-builds.md). It runs what decides whether a restored
certificate is re-issued (the certificates-trigger, -issuing, -key-manager, -request-manager, -readiness
and -revision-manager controllers), Issuer and ClusterIssuer readiness, CertificateRequest approval, and
the CA and self-signed signers. Installed as cert-manager's manifests would: its CRDs from the same pinned
module and the ``cert-manager`` namespace (where ClusterIssuers keep their Secrets) before it starts.
"""

from __future__ import annotations

import dataclasses

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.gomods import lab_binary

NAMESPACE = "cert-manager"


@dataclasses.dataclass
class CertManagerController(ClusterProcess):
    kind = "cert-manager"
    binaries = ("cert-manager-controller",)
    identity = ("drtool-lab-cert-manager", ("system:masters",))

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/healthz"

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient, install_crds

        client = KubeClient(self.access())
        install_crds(client, ["cert-manager"])
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def argv(self) -> list[str]:
        flags = {
            "kubeconfig": self.kubeconfig_path,
            "cluster-resource-namespace": NAMESPACE,
            "healthz-address": f"127.0.0.1:{self.health_port}",
        }
        return [str(lab_binary("cert-manager-controller")), *(f"--{k}={v}" for k, v in flags.items())]
