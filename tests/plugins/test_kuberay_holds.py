"""A RayJob restored into a namespace of a cluster running the real KubeRay operator starts nothing until released.

One living lab (API server, controller-manager, scheduler, kwok's nodes) runs KubeRay's operator v1.5.0,
built from its pinned module (opt-in lab component ``kuberay``), and is both source and target (as in
test_kubernetes_holds.py): there the operator has given a RayJob its RayCluster and head pod (kwok runs it).
drtool backs the namespace up and restores it into a new namespace (the plan's ``namespaces`` transform): the
operator sees the held RayJob, settles it as ``Suspended`` and creates no RayCluster and no pod there; the
restore leaves out the source's RayCluster (its RayJob names a new one when it runs, so a restored copy would
run on its own beside it). The plan's release step then lets the operator create the cluster, and kwok runs
its head pod.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.lab import BARE_KINDS
from kubernetes import client

from drtool.kube.holds import HELD
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, lab_name, start_kube_lab, wait_for

KINDS = (*BARE_KINDS, "kube-controller-manager", "kube-scheduler", "kwok", "kuberay")
RAY = ("ray.io", "v1")
NS, RESTORED = "ml", "ml-restored"
TRANSFORMS = {"namespaces": {NS: RESTORED}}
plugin = get_plugin("kubernetes")


@pytest.fixture
def living(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    kube = start_kube_lab(lab_root, lab_name("ray", request), kinds=KINDS)
    yield kube
    kube.lab.down()


def _rayjob() -> dict[str, Any]:
    head = {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "100m"}}}
    cluster = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "etl"},
        "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": cluster},
    }


def _clusters(custom: Any, namespace: str) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(*RAY, namespace, "rayclusters")["items"]


def _running_pods(core: Any, namespace: str) -> list[str]:
    return [p.metadata.name for p in core.list_namespaced_pod(namespace).items if p.status.phase == "Running"]


def test_restored_rayjob_creates_no_cluster_until_released(living: KubeLab, repo: Repository) -> None:
    with living.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": NS}})
        custom.create_namespaced_custom_object(*RAY, NS, "rayjobs", _rayjob())
        wait_for(lambda: _clusters(custom, NS), "the source's operator creating the RayJob's RayCluster", timeout=120)
        wait_for(lambda: _running_pods(core, NS), "kwok running the source's head pod", timeout=120)
    with BackupSession(repo) as session:
        assert session.run_plugin(plugin, {"kubeconfig": living.kubeconfig, "include_namespaces": [NS]}).status == "ok"
        manifest = session.commit()

    target, options = {"kubeconfig": living.kubeconfig}, {"transforms": TRANSFORMS}
    restored = run_restore(repo, manifest, plugin, target, options={**options, "settle": 5})
    assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
    assert restored.result.details["held"] == [f"RayJob {NS}/etl"]  # named as backed up (as in test_kubernetes_holds)
    with living.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

        def status() -> str | None:
            job = custom.get_namespaced_custom_object(*RAY, RESTORED, "rayjobs", "etl")
            return (job.get("status") or {}).get("jobDeploymentStatus")

        wait_for(lambda: status() == "Suspended", "the operator settling the held RayJob", timeout=120)
        job = custom.get_namespaced_custom_object(*RAY, RESTORED, "rayjobs", "etl")
        assert job["spec"]["suspend"] is True and HELD in job["metadata"]["annotations"]
        assert not _clusters(custom, RESTORED)  # the operator reconciled it and created nothing
        assert not core.list_namespaced_pod(RESTORED).items

        released = run_restore(repo, manifest, plugin, target, options={**options, "release": True})
        assert released.verified, [(c.name, c.detail) for c in released.checks if not c.ok]
        assert released.result.summary.startswith("released 1 held object(s)"), released.result.summary
        clusters = wait_for(lambda: _clusters(custom, RESTORED), "the released RayJob's cluster", 120)
        assert [c["metadata"]["ownerReferences"][0]["name"] for c in clusters] == ["etl"]
        wait_for(lambda: _running_pods(core, RESTORED), "kwok running the released job's head pod", timeout=120)
