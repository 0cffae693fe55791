"""How the helm plugin's source and target stand up in a lab: a control plane for release Secrets and a
registry for charts, seeded with sample.py's releases and OCI charts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from drtool_lab.build import PINNED, go_binary
from drtool_lab.cluster import KINDS, apiserver
from drtool_lab.oci import lab_registry
from drtool_plugins.helm.sample import push_oci_chart, seed_releases

from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from drtool.plugin.toolkit.oci.registry import Registry

if TYPE_CHECKING:
    from drtool_lab.lab import Lab

CHARTS = (("webapp", "0.1.0"), ("webapp", "0.2.0"), ("batchjobs", "1.0.0"))


def helm_cli() -> Path:
    """The Helm CLI, built once from the Go module proxy (about 3 minutes) and cached like the lab's servers:
    tests run `helm list`/`helm history` against a restored lab with it. Pinned in ``drtool_lab.build.PINNED``
    (``python -m drtool_lab.build helm``)."""
    return go_binary("helm", *PINNED["helm"])


def _kubeconfig(lab: Lab) -> str:
    return str(apiserver(lab).admin_kubeconfig)


class HelmLab:
    """``LabSupport`` for the helm plugin."""

    kinds = (*KINDS, "registry")

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        kubeconfig = _kubeconfig(lab)
        seed_releases(KubeClient(Connection(kubeconfig=kubeconfig)))
        reg = Registry(lab_registry(lab).host)
        refs = []
        for name, version in CHARTS:
            push_oci_chart(reg, f"charts/{name}", name, version)
            refs.append(f"oci://{reg.host}/charts/{name}:{version}")
        return {"kubeconfig": kubeconfig, "oci_charts": refs}

    def target(self, lab: Lab) -> dict[str, Any]:
        return {"kubeconfig": _kubeconfig(lab), "registry": lab_registry(lab).host}
