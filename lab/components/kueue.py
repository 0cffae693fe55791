"""The Kueue controller manager (``sigs.k8s.io/kueue``, built in ``gomod/kueue``) running against the lab.

It does what Kueue does in production: computes ClusterQueue and LocalQueue status (an inactive queue says
why), admits Workloads onto ResourceFlavors within quota, injects the flavor's node labels and tolerations
into the admitted Job's pods, and serves its admission webhooks. Installed as Kueue's manifests would
install it, from the same pinned module: its CRDs (before it starts: it watches them), the ``kueue-system``
namespace, its configuration (a file, ``config.yaml``) and its webhook configurations.

Loopback instead of a Service: the webhook server listens on 127.0.0.1 with a serving certificate signed
by the lab's cluster CA, and the webhook configurations point at ``https://127.0.0.1:PORT/...`` through
``clientConfig.url`` with that CA as ``caBundle``; only the webhooks for Kueue's own kinds and for the
integrations the lab enables (``batch/job``) are registered. Kueue's own certificate management stays off
(it issues certificates for a Service name). With it off, Kueue v0.17 insists on reading a metrics serving
certificate from the fixed path ``/etc/kueue/metrics/certs`` even with metrics disabled: the lab writes a
throwaway self-signed pair there once (running as root), else it stops with a hint. The visibility API
server (a fixed port 8082 on every address) is disabled by feature gate.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from drtool_lab.components.loopback_webhooks import WebhookOperator, loopback_webhooks
from drtool_lab.gomods import lab_binary

from drtool.errors import SourceError
from drtool.servers import pki

Obj = dict[str, Any]
NAMESPACE = "kueue-system"
FRAMEWORKS = ("batch/job",)
WEBHOOK_PATHS = ("-kueue-x-k8s-io-", "-batch-v1-job")  # Kueue's own kinds, and batch/job
WEBHOOK_MANIFESTS = "config/components/webhook/manifests.yaml"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")  # hard-coded in Kueue v0.17's main


def webhook_configurations(port: int, ca_bundle: bytes) -> list[Obj]:
    """Kueue's webhook configurations from its module, pointed at ``https://127.0.0.1:port`` (lab CA)."""
    return loopback_webhooks("kueue", WEBHOOK_MANIFESTS, "kueue", WEBHOOK_PATHS, port, ca_bundle)


def ensure_metrics_certs(directory: Path = METRICS_CERTS) -> None:
    """The certificate pair Kueue v0.17 reads at start-up, whatever its metrics settings (see above)."""
    if (directory / "tls.crt").is_file() and (directory / "tls.key").is_file():
        return
    if os.geteuid() != 0:
        raise SourceError(
            f"Kueue needs a certificate pair in {directory} (hard-coded upstream) and only root can create it",
            f"run once as root: drtool lab up --with kueue; or create {directory}/tls.crt and tls.key yourself",
        )
    ca = pki.make_ca(directory / "ca", "drtool lab throwaway CA (Kueue metrics, unused)")
    pki.issue(ca, directory, "tls", "kueue-metrics.lab")


@dataclasses.dataclass
class KueueController(WebhookOperator):
    kind = "kueue"
    binaries = ("kueue",)
    identity = ("drtool-lab-kueue", ("system:masters",))
    module = "kueue"
    webhook_manifests = WEBHOOK_MANIFESTS
    webhook_paths = WEBHOOK_PATHS
    config_api = "config.kueue.x-k8s.io/v1beta2"

    def config(self) -> Obj:
        config = super().config()
        config["webhook"]["certDir"] = str(self.serving_dir)
        return config | {
            "namespace": NAMESPACE,
            "manageJobsWithoutQueueName": False,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": list(FRAMEWORKS)},
            "featureGates": {"VisibilityOnDemand": False},
        }

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient

        ensure_metrics_certs()
        super().prepare()  # its serving certificate, config.yaml, its CRDs (before it starts: it watches them)
        KubeClient(self.access()).apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def argv(self) -> list[str]:
        config = f"--config={self.config_path}"
        return [str(lab_binary("kueue")), config, f"--kubeconfig={self.kubeconfig_path}", "--zap-log-level=info"]
