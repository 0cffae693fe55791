"""An operator's admission webhooks, served on loopback: its upstream webhook configurations pointed at
``https://127.0.0.1:PORT/...`` with the lab's cluster CA.

In a cluster the API server reaches an operator's webhook server through a Service; the lab's operators run
as local processes, so the configurations from the pinned module get ``clientConfig.url`` instead of
``clientConfig.service`` and the cluster CA (which signed the operator's serving certificate) as
``caBundle``. Only the webhooks whose paths the caller names are kept: an operator's webhook for every pod
of the cluster (JobSet's) would put it in the path of every other test's pods. ``WebhookOperator`` is what
the lab's controller-runtime operators share around that.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.kube_apiserver import FIELD_MANAGER, KubeAccess, apply

from drtool.servers import process

Obj = dict[str, Any]


def loopback_webhooks(
    module: str, manifests: str, prefix: str, paths: Iterable[str], port: int, ca_bundle: bytes
) -> list[Obj]:
    """The webhook configurations in ``manifests`` of the pinned ``module`` (drtool_lab.upstream), renamed
    ``<prefix>-<name>``, keeping the webhooks whose path contains one of ``paths``, pointed at the port."""
    from drtool_lab import upstream

    wanted = tuple(paths)
    configs = upstream.yaml_docs(module, [manifests])
    for config in configs:
        name = config["metadata"]["name"]
        config["metadata"] = {"name": f"{prefix}-{name}", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}
        hooks = [h for h in config["webhooks"] if any(p in h["clientConfig"]["service"]["path"] for p in wanted)]
        for hook in hooks:
            url = f"https://127.0.0.1:{port}{hook['clientConfig']['service']['path']}"
            hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca_bundle).decode()}
        config["webhooks"] = hooks
    return [c for c in configs if c["webhooks"]]


def register(access: KubeAccess, configs: Iterable[Obj]) -> None:
    """Apply the configurations (once the operator serves them: their failurePolicy is Fail)."""
    with access.session() as session:
        for config in configs:
            plural = f"{config['kind'].lower()}s"
            url = f"{access.url}/apis/admissionregistration.k8s.io/v1/{plural}/{config['metadata']['name']}"
            apply(session, url, config)


@dataclasses.dataclass
class WebhookOperator(ClusterProcess):
    """A controller-runtime manager configured by a file (``config()``), with its CRDs installed before it starts
    and its webhooks served on loopback with a serving certificate from the lab's CA (Kueue, JobSet, Trainer)."""

    module: ClassVar[str] = ""  # its key in drtool_lab.upstream
    crds: ClassVar[tuple[str, ...]] = ()  # globs of its CRD files (none: those the upstream table names)
    webhook_manifests: ClassVar[str] = ""
    webhook_paths: ClassVar[tuple[str, ...]] = ()
    config_api: ClassVar[str] = ""  # its configuration's apiVersion
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
        """What every lab operator's configuration says: health on loopback, no metrics, webhooks on loopback."""
        return {
            "apiVersion": self.config_api,
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port},
        }

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient, install_crds

        self.serving_cert()  # the webhook server's, in serving_dir
        self.config_path.write_text(json.dumps(self.config(), indent=2))  # JSON is YAML
        install_crds(KubeClient(self.access()), [self.module], self.crds)

    def started(self) -> None:
        """Register the webhooks once the manager serves them (failurePolicy Fail: not a moment earlier)."""
        configs = self.webhook_configurations(Path(self.cluster_ca).read_bytes())
        register(self.access(), configs)

    def webhook_configurations(self, ca_bundle: bytes) -> list[Obj]:
        return loopback_webhooks(
            self.module, self.webhook_manifests, self.kind, self.webhook_paths, self.webhook_port, ca_bundle
        )

    def describe(self) -> str:
        return f"webhooks https://127.0.0.1:{self.webhook_port}, health {self.health_url()}"
