"""AI workloads never start twice: Jobs (plain and Kueue's) and TrainJobs restored held, released by a step.

One living lab (kube-controller-manager, kube-scheduler, kwok's nodes, Kueue) is both source and target:
namespace ``src`` holds a Job that completed, a Job still waiting for a node pool that does not exist, a Kueue
Job admitted but waiting for that pool too, and a TrainJob (its CRD from the pinned Kubeflow Trainer module;
no Trainer operator runs, so only its fields are checked). The backup is restored into ``dst`` through a
plan's transforms (``src`` -> ``dst``, and the missing pool mapped onto the lab's CPU pool): the Job
controller and Kueue see every restored Job and start none; the release step then lets the waiting Jobs run
on kwok's nodes to completion, while the completed Job stays a record and never runs again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.kube_seed import KubeClient as SeedClient
from drtool_lab.kube_seed import install_crds
from drtool_lab.lab import BARE_KINDS
from kubernetes import client

from drtool.kube.holds import COMPLETED, HELD
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, lab_name, start_kube_lab, wait_for

KINDS = (*BARE_KINDS, "kube-controller-manager", "kube-scheduler", "kwok", "kueue")
GONE_POOL = {"cloud.google.com/gke-nodepool": "retired-pool"}  # no node of the lab has it
TRANSFORMS = {
    "namespaces": {"src": "dst"},
    "node-labels": {"cloud.google.com/gke-nodepool=retired-pool": "cloud.google.com/gke-nodepool=cpu-pool"},
}
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
plugin = get_plugin("kubernetes")


@pytest.fixture
def living(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    kube = start_kube_lab(lab_root, lab_name("holds", request), kinds=KINDS)
    try:
        install_crds(SeedClient(kube.apiserver.access()), ["trainer"])
        yield kube
    finally:
        kube.lab.down()


def _job(name: str, selector: dict[str, str] | None = None, queue: str | None = None) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.example/train:1",
                                                     "resources": {"requests": {"cpu": "100m"}}}]}  # fmt: skip
    if selector:
        pod["nodeSelector"] = selector
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    spec = {"backoffLimit": 0, "template": {"spec": pod}, "suspend": bool(queue)}
    return {"metadata": {"name": name, "namespace": "src", "labels": labels}, "spec": spec}


def _seed(kube: KubeLab) -> None:
    with kube.api_client() as api:
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": "src"}})
        core.create_namespace({"metadata": {"name": "dst"}})
        kueue = {"apiVersion": "kueue.x-k8s.io/v1beta2"}
        flavor = {**kueue, "kind": "ResourceFlavor", "metadata": {"name": "cpu"}, "spec": {}}
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", flavor)
        quota = {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }
        queue = {**kueue, "kind": "ClusterQueue", "metadata": {"name": "cq"},
                 "spec": {"namespaceSelector": {}, "resourceGroups": [quota]}}  # fmt: skip
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", queue)
        local = {**kueue, "kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "src", "localqueues", local)
        batch.create_namespaced_job("src", _job("done"))
        batch.create_namespaced_job("src", _job("waiting", GONE_POOL))
        wait_for(lambda: _complete(batch.read_namespaced_job("done", "src")), "the source's Job completed")
        # Kueue admits a queued Job once its LocalQueue is active: created until the webhook lets it in
        wait_for(lambda: _created(batch, _job("queued", GONE_POOL, queue="lq")), "Kueue accepting the queued Job")
        wait_for(lambda: batch.read_namespaced_job("queued", "src").spec.suspend is False, "Kueue admitting it")
        trainjob = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "pretrain"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
        custom.create_namespaced_custom_object(*TRAINER, "src", "trainjobs", trainjob)


def _created(batch: Any, job: dict[str, Any]) -> bool:
    try:
        batch.create_namespaced_job("src", job)
    except client.ApiException as exc:
        return exc.status == 409  # created by an earlier attempt; otherwise the webhook is not serving yet
    return True


def _complete(job: Any) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])


def _suspended_seen(job: Any) -> bool:
    """The Job controller has reconciled the held Job: it writes the Suspended condition."""
    return any(c.type == "Suspended" and c.status == "True" for c in job.status.conditions or [])


def test_restored_jobs_start_nothing_until_released(living: KubeLab, repo: Repository) -> None:
    _seed(living)
    source = {"kubeconfig": living.kubeconfig, "include_namespaces": ["src"]}
    with BackupSession(repo) as session:
        assert session.run_plugin(plugin, source).status == "ok"
        manifest = session.commit()
    target = {"kubeconfig": living.kubeconfig}
    restored = run_restore(repo, manifest, plugin, target, options={"transforms": TRANSFORMS, "settle": 5})
    assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
    assert "4 held until a release step" in restored.result.summary  # done (as a record), waiting, queued, pretrain
    with living.api_client() as api:
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        for name in ("done", "waiting", "queued"):
            wait_for(lambda n=name: _suspended_seen(batch.read_namespaced_job(n, "dst")), f"{name} seen suspended")
        assert not core.list_namespaced_pod("dst").items  # the controllers ran and started nothing
        queued = batch.read_namespaced_job("queued", "dst")
        assert "kueue.x-k8s.io/queue-name" not in (queued.metadata.labels or {})  # Kueue leaves it alone
        assert not custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "dst", "workloads")["items"]
        waiting = batch.read_namespaced_job("waiting", "dst")
        assert waiting.spec.template.spec.node_selector == {"cloud.google.com/gke-nodepool": "cpu-pool"}
        assert COMPLETED in batch.read_namespaced_job("done", "dst").metadata.annotations
        trainjob = custom.get_namespaced_custom_object(*TRAINER, "dst", "trainjobs", "pretrain")
        assert trainjob["spec"]["suspend"] is True and HELD in trainjob["metadata"]["annotations"]

        released = run_restore(repo, manifest, plugin, target, options={"transforms": TRANSFORMS, "release": True})
        assert released.verified, [(c.name, c.detail) for c in released.checks if not c.ok]
        assert released.result.summary.startswith("released 3 held object(s)"), released.result.summary
        assert "1 completed Job(s) kept as records, not re-run" in released.result.summary
        for name in ("waiting", "queued"):  # kwok's CPU node runs them; Kueue admits the queued one first
            wait_for(lambda n=name: _complete(batch.read_namespaced_job(n, "dst")), f"released {name} completing")
        done = batch.read_namespaced_job("done", "dst")
        assert done.spec.suspend and not _complete(done)
        assert not core.list_namespaced_pod("dst", label_selector="job-name=done").items  # never re-run
        trainjob = custom.get_namespaced_custom_object(*TRAINER, "dst", "trainjobs", "pretrain")
        assert not trainjob["spec"].get("suspend") and HELD not in (trainjob["metadata"].get("annotations") or {})


ARGO = ("argoproj.io", "v1alpha1")
FLUX = ("kustomize.toolkit.fluxcd.io", "v1")
AUTOMATED = {"prune": True, "selfHeal": True}


@pytest.fixture
def gitops(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    """An API server with Argo CD's Application and Flux's Kustomization CRDs from their pinned modules, and no
    controller: Flux's do not build here (docs/lab-builds.md); the real Argo CD runs in test_argocd_holds.py."""
    kube = start_kube_lab(lab_root, lab_name("gitops", request))
    try:
        install_crds(SeedClient(kube.apiserver.access()), ["argo-cd", "flux-kustomize"])
        yield kube
    finally:
        kube.lab.down()


def _kustomization(custom: Any) -> None:
    spec = {"interval": "5m", "path": "./apps", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "p"}}
    body = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "apps"}}
    custom.create_namespaced_custom_object(*FLUX, "src", "kustomizations", {**body, "spec": spec})


def _backup_src(kube: KubeLab, repo: Repository) -> Any:
    with BackupSession(repo) as session:
        assert session.run_plugin(plugin, {"kubeconfig": kube.kubeconfig, "include_namespaces": ["src"]}).status == "ok"
        return session.commit()


def test_gitops_apps_are_restored_held_and_released_after_verify(gitops: KubeLab, repo: Repository) -> None:
    with gitops.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": "src"}})
        source = {"repoURL": "https://git.example.com/platform.git", "path": "apps", "targetRevision": "main"}
        destination = {"server": "https://kubernetes.default.svc", "namespace": "apps"}
        spec = {"project": "default", "source": source, "destination": destination,
                "syncPolicy": {"automated": AUTOMATED}}  # fmt: skip
        custom.create_namespaced_custom_object(*ARGO, "src", "applications", {"apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application", "metadata": {"name": "platform"}, "spec": spec})  # fmt: skip
        _kustomization(custom)
    manifest = _backup_src(gitops, repo)
    target, options = {"kubeconfig": gitops.kubeconfig}, {"transforms": {"namespaces": {"src": "dst"}}, "settle": 2}
    restored = run_restore(repo, manifest, plugin, target, options=options)
    assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
    assert sorted(restored.result.details["held"]) == ["Application src/platform", "Kustomization src/apps"]
    with gitops.api_client() as api:
        custom = client.CustomObjectsApi(api)
        app = custom.get_namespaced_custom_object(*ARGO, "dst", "applications", "platform")
        assert "automated" not in (app["spec"].get("syncPolicy") or {}) and HELD in app["metadata"]["annotations"]
        kustomization = custom.get_namespaced_custom_object(*FLUX, "dst", "kustomizations", "apps")
        assert kustomization["spec"]["suspend"] is True
    released = run_restore(repo, manifest, plugin, target, options={**options, "release": True})
    assert released.verified and released.result.summary.startswith("released 2 held object(s)")
    assert any("spec.syncPolicy.automated=" in line for line in released.result.details["released"])
    with gitops.api_client() as api:
        custom = client.CustomObjectsApi(api)
        app = custom.get_namespaced_custom_object(*ARGO, "dst", "applications", "platform")
        assert app["spec"]["syncPolicy"]["automated"] == AUTOMATED and HELD not in app["metadata"].get(
            "annotations", {}
        )
        kustomization = custom.get_namespaced_custom_object(*FLUX, "dst", "kustomizations", "apps")
        assert not kustomization["spec"].get("suspend")
    again = run_restore(repo, manifest, plugin, target, options={**options, "release": True})
    assert again.result.summary.startswith("released 0 held object(s)")  # a release is idempotent


def _flux_like_controller(gitops: KubeLab, done: threading.Event) -> None:
    """What kustomize-controller does once a Kustomization may sync (its controller is not run here, see the
    fixture): apply Git's ConfigMaps (one changed, one new), prune one Git no longer has, then report Ready for
    the Kustomization's new generation. Waits for the release to unsuspend it first."""
    with gitops.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        read = lambda: custom.get_namespaced_custom_object(*FLUX, "dst", "kustomizations", "apps")  # noqa: E731
        kustomization = wait_for(lambda: (k := read())["spec"].get("suspend") is not True and k, "the release")
        manager = {"field_manager": "kustomize-controller"}
        core.patch_namespaced_config_map("settings", "dst", {"data": {"mode": "git"}}, **manager)
        core.create_namespaced_config_map("dst", {"metadata": {"name": "added"}, "data": {"k": "v"}}, **manager)
        core.delete_namespaced_config_map("pruned", "dst")
        ready = {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "applied",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        status = {"status": {"observedGeneration": kustomization["metadata"]["generation"], "conditions": [ready]}}
        custom.patch_namespaced_custom_object_status(*FLUX, "dst", "kustomizations", "apps", status, **manager)
    done.set()


def test_a_gitops_release_reports_what_the_controller_changed(gitops: KubeLab, repo: Repository) -> None:
    """The drift report against Flux's Kustomization CRD, with the controller's changes made by the test."""
    with gitops.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": "src"}})
        for name in ("settings", "pruned", "kept"):
            core.create_namespaced_config_map("src", {"metadata": {"name": name}, "data": {"mode": "backup"}})
        _kustomization(custom)
    manifest = _backup_src(gitops, repo)
    target, options = {"kubeconfig": gitops.kubeconfig}, {"transforms": {"namespaces": {"src": "dst"}}, "settle": 2}
    assert run_restore(repo, manifest, plugin, target, options=options).verified
    done = threading.Event()
    controller = threading.Thread(target=_flux_like_controller, args=(gitops, done), daemon=True)
    controller.start()
    released = run_restore(repo, manifest, plugin, target, options={**options, "release": True, "drift": 60})
    controller.join(timeout=60)
    assert done.is_set()
    details = released.result.details
    assert details["not_reconciled"] == []
    assert "the GitOps controllers changed 3 thing(s)" in released.result.summary, details
    drift = details["drift"]
    assert drift[0].startswith("ConfigMap dst/added: created by kustomize-controller"), drift
    assert drift[1] == "ConfigMap dst/pruned: deleted", drift
    assert drift[2].startswith(
        "ConfigMap dst/settings: data.mode: backup 'backup', target 'git' by kustomize-controller (Update"
    ), drift
