"""Kubeflow Trainer v2's controller manager and the JobSet controller running against the lab: opt-in,
`drtool lab up --with trainer` (which brings ``jobset``); both built in ``gomod/trainer``.

They do what they do in production: Trainer turns a TrainJob and its (Cluster)TrainingRuntime into a JobSet
it owns (``spec.suspend`` copied from the TrainJob), and JobSet turns a JobSet into its Jobs (suspended while
the JobSet is), which the lab's kube-controller-manager turns into pods. kwok runs those pods (no code runs);
the pods labelled ``drtool.dev/check`` are the lab node's, which runs their containers as local processes
(lab/node.py): that is how a TrainJob runs the lab trainer for real (tests/plugins/test_trainjob_holds.py).

Installed as their manifests would install them, from the pinned modules: their CRDs before they start
(Trainer watches TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes and JobSets), a configuration file
each, and their admission webhooks (defaulting and validation of their own kinds) registered once they serve
them, on loopback with a serving certificate from the lab's cluster CA (``loopback_webhooks``). Their own
certificate management is off (it issues certificates for a Service name), as are leader election and
metrics. JobSet's webhooks for every pod of the cluster (exclusive placement) are not registered.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from drtool_lab.components.loopback_webhooks import Obj, WebhookOperator
from drtool_lab.gomods import lab_binary


@dataclasses.dataclass
class JobSetController(WebhookOperator):
    kind = "jobset"
    binaries = ("jobset",)
    identity = ("drtool-lab-jobset", ("system:masters",))
    module = "jobset"
    crds = ("config/components/crd/bases/*.yaml",)
    webhook_manifests = "config/components/webhook/manifests.yaml"
    webhook_paths = ("-jobset-x-k8s-io-",)  # not its pod webhooks
    config_api = "config.jobset.x-k8s.io/v1alpha1"

    def config(self) -> Obj:
        config = super().config()
        config["webhook"]["certDir"] = str(self.serving_dir)
        return config | {"leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False}}

    def argv(self) -> list[str]:
        return [str(lab_binary("jobset")), f"--config={self.config_path}", f"--kubeconfig={self.kubeconfig_path}"]


@dataclasses.dataclass
class TrainerController(WebhookOperator):
    kind = "trainer"
    binaries = ("trainer-controller-manager",)
    identity = ("drtool-lab-trainer", ("system:masters",))
    module = "trainer"
    crds = ("manifests/base/crds/trainer.kubeflow.org_*.yaml",)  # the seed installs only some of them
    webhook_manifests = "manifests/base/webhook/manifests.yaml"
    webhook_paths = ("-trainer-kubeflow-org-",)
    config_api = "config.trainer.kubeflow.org/v1alpha1"

    def requirements(self) -> tuple[str, ...]:
        return ("kube-apiserver", "jobset")  # a TrainJob runs as a JobSet

    @property
    def serving_dir(self) -> Path:
        # Trainer's configuration has no certificate folder: controller-runtime's default under TMPDIR
        return self.path / "tmp" / "k8s-webhook-server" / "serving-certs"

    def process_env(self) -> dict[str, str]:
        return {"TMPDIR": str(self.path / "tmp")}

    def config(self) -> Obj:
        return super().config() | {"certManagement": {"enable": False}}  # leader election is off by default

    def argv(self) -> list[str]:
        binary = str(lab_binary("trainer-controller-manager"))
        return [binary, f"--config={self.config_path}", f"--kubeconfig={self.kubeconfig_path}"]
