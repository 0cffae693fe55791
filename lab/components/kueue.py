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

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.kube_apiserver import FIELD_MANAGER, apply
from drtool_lab.gomods import lab_binary

from drtool.errors import SourceError
from drtool.servers import pki, process

Obj = dict[str, Any]
NAMESPACE = "kueue-system"
FRAMEWORKS = ("batch/job",)
WEBHOOK_PATHS = ("-kueue-x-k8s-io-", "-batch-v1-job")  # Kueue's own kinds, and batch/job
WEBHOOK_MANIFESTS = "config/components/webhook/manifests.yaml"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")  # hard-coded in Kueue v0.17's main


def webhook_configurations(port: int, ca_bundle: bytes) -> list[Obj]:
    """Kueue's webhook configurations from its module, pointed at ``https://127.0.0.1:port`` (lab CA)."""
    from drtool_lab import upstream

    configs = upstream.yaml_docs("kueue", [WEBHOOK_MANIFESTS])
    for config in configs:
        name = config["metadata"]["name"]
        config["metadata"] = {"name": f"kueue-{name}", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}
        hooks = [h for h in config["webhooks"] if any(p in h["clientConfig"]["service"]["path"] for p in WEBHOOK_PATHS)]
        for hook in hooks:
            url = f"https://127.0.0.1:{port}{hook['clientConfig']['service']['path']}"
            hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca_bundle).decode()}
        config["webhooks"] = hooks
    return configs


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
class KueueController(ClusterProcess):
    kind = "kueue"
    binaries = ("kueue",)
    identity = ("drtool-lab-kueue", ("system:masters",))
    webhook_port: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.webhook_port = self.webhook_port or process.free_port()

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/readyz"

    def config(self) -> Obj:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "manageJobsWithoutQueueName": False,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.serving_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": list(FRAMEWORKS)},
            "featureGates": {"VisibilityOnDemand": False},
        }

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient, install_crds

        ensure_metrics_certs()
        self.serving_cert()  # the webhook server's, in serving_dir
        self.config_path.write_text(json.dumps(self.config(), indent=2))  # JSON is YAML
        client = KubeClient(self.access())
        install_crds(client, ["kueue"])
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def argv(self) -> list[str]:
        config = f"--config={self.config_path}"
        return [str(lab_binary("kueue")), config, f"--kubeconfig={self.kubeconfig_path}", "--zap-log-level=info"]

    def started(self) -> None:
        """Register the webhooks once Kueue serves them (failurePolicy Fail: not a moment earlier)."""
        configs = webhook_configurations(self.webhook_port, Path(self.cluster_ca).read_bytes())
        with self.access().session() as session:
            for config in configs:
                plural = f"{config['kind'].lower()}s"
                url = f"{self.server}/apis/admissionregistration.k8s.io/v1/{plural}/{config['metadata']['name']}"
                apply(session, url, config)

    def describe(self) -> str:
        return f"webhooks https://127.0.0.1:{self.webhook_port}, health {self.health_url()}"
