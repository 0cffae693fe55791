"""Images found in a cluster's workloads, and workloads restored pointing at the new registry.

One cluster (a fresh lab, since the test writes) runs a Deployment pinned by digest, a CronJob by tag and a
Pod from Docker Hub; the images plugin finds all three, copies the two from the lab registry (Docker Hub is
filtered out: no internet here) and pushes them to the target registry; the kubernetes plugin's
``image_registry_map`` restores the workloads into a second cluster pulling from that registry, with the
same digests, and its verify accepts the rewritten references.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from drtool_plugins.images import ImagesPlugin
from drtool_plugins.kubernetes import KubernetesPlugin
from kubernetes import client as k8s

from drtool.kube.discovery import ResourceType
from drtool.kube.transforms import Transforms
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, start_kube_lab
from tests.fixtures.registry import RegistryLab


def _pod_spec(image: str) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": image}], "restartPolicy": "OnFailure"}


def _deploy(kube: KubeLab, trainer: str, app: str) -> None:
    labels = {"app": "trainer"}
    with kube.api_client() as api:
        core, apps, batch = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": "ml"}})
        spec = {**_pod_spec(trainer), "restartPolicy": "Always"}
        deployment = {
            "metadata": {"name": "trainer", "namespace": "ml"},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
        }
        apps.create_namespaced_deployment("ml", deployment)
        job = {"spec": {"template": {"spec": _pod_spec(app)}}}
        cron = {
            "metadata": {"name": "nightly", "namespace": "ml"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": job},
        }
        batch.create_namespaced_cron_job("ml", cron)
        core.create_namespaced_pod(
            "ml", {"metadata": {"name": "web", "namespace": "ml"}, "spec": _pod_spec("nginx:1.27")}
        )


def test_map_images_rewrites_hosts_only() -> None:
    obj = {"spec": {"containers": [{"image": "a.example:5000/x/y@sha256:" + "0" * 64}, {"image": "nginx"}]}}
    pods = ResourceType("", "v1", "pods", "Pod", namespaced=True)
    Transforms(image_registries={"a.example:5000": "b.example", "docker.io": "mirror.example"}).apply(obj, pods)
    assert [c["image"] for c in obj["spec"]["containers"]] == [
        "b.example/x/y@sha256:" + "0" * 64,
        "mirror.example/library/nginx",
    ]


def test_workload_images_copied_and_workloads_repointed(
    repo: Repository, lab_root: Path, kube_target: KubeLab, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    src, dst = registry_source, registry_target
    trainer = f"{src.host}/ai/trainer@{src.pushed['trainer'].digest}"
    _deploy(kube_target, trainer, src.ref("app0"))
    source = {"kubeconfig": kube_target.kubeconfig, "registries": "127.0.0.1:*"}
    with BackupSession(repo) as session:
        assert session.run_plugin(ImagesPlugin(), source).status == "ok"
        k8s_source = {"kubeconfig": kube_target.kubeconfig, "include_namespaces": ["ml"]}
        assert session.run_plugin(KubernetesPlugin(), k8s_source).status == "ok"
        manifest = session.commit()
    meta = manifest.plugins["images"].meta
    assert meta["images"] == 2 and list(meta["skipped"]) == ["nginx:1.27"]

    images = run_restore(repo, manifest, ImagesPlugin(), {"registry_map": f"{src.host}={dst.host}"})
    assert images.verified, images.checks

    second = start_kube_lab(lab_root, "images-wl-dst")
    try:
        target = {"kubeconfig": second.kubeconfig}
        options = {"image_registry_map": f"{src.host}={dst.host}"}
        outcome = run_restore(repo, manifest, KubernetesPlugin(), target, options=options)
        assert outcome.verified, [c for c in outcome.checks if not c.ok]
        with second.api_client() as api:
            deployment = k8s.AppsV1Api(api).read_namespaced_deployment("trainer", "ml")
            cron = k8s.BatchV1Api(api).read_namespaced_cron_job("nightly", "ml")
            pod = k8s.CoreV1Api(api).read_namespaced_pod("web", "ml")
        assert (
            deployment.spec.template.spec.containers[0].image == f"{dst.host}/ai/trainer@{src.pushed['trainer'].digest}"
        )
        assert cron.spec.job_template.spec.template.spec.containers[0].image == f"{dst.host}/platform/app0:v1"
        assert pod.spec.containers[0].image == "nginx:1.27"  # not mapped: left alone
        again = run_restore(repo, manifest, KubernetesPlugin(), target, options=options)
        assert again.verified and not again.result.changed
    finally:
        second.lab.down()
