"""Platform checks against a real restore: a living source (controllers, kwok GPU nodes, Kueue, cert-manager)
seeded and running a training job that is killed while it saves a checkpoint, backed up, gone, and restored
into a fresh living cluster. Every check passes there, then each is made to fail for the reason it exists:
an inactive ClusterQueue, a pod that cannot be scheduled, a re-issued certificate, an object the garbage
collector deletes, a training run resuming from the wrong step. Everything is read through the target's
own APIs (the official client for what the tests change or read back).

One living lab runs at a time: the source is stopped (and deleted) before the target starts.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab import kube_seed
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.components.kwok import node_pools
from drtool_lab.components.minio import MinioServer
from drtool_lab.lab import LIVING_KINDS, Lab
from drtool_lab.support import lab_support
from drtool_plugins.checkpoints.resume_check import RecoveryPoint, compare, recovery_point
from kubernetes import client, config

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.kube.readings import is_true
from drtool.plans.checks import run_checks
from drtool.plans.executor import Executor
from drtool.plans.loader import load_plan
from drtool.plans.platform.context import TimedCheck
from drtool.plans.schema import Plan
from drtool.plans.validate import check_file
from drtool.plugin.checks import contributed
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.manifest import ArtifactEntry, Manifest, PluginOutcome
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE
from tests.lab.test_lab_living import wait_for

TARGET_BUCKET = "restored-checkpoints"
# the lab registers each living cluster's own webhook configurations; the source's point at its own ports
INSTALLED = [
    "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    "validatingwebhookconfigurations.admissionregistration.k8s.io",
]
PLAN = """
name: platform
parallelism: 2
steps:
  - {id: checkpoints, uses: checkpoints}
  - {id: cluster-objects, uses: kubernetes, with: {existing: update}}
"""
TRAINER = {"image": "drtool", "command": ["python", "-m", "drtool_lab.trainer"]}  # run by the lab's node
PLANS = Path(__file__).resolve().parents[2] / "restore-plans"


@dataclasses.dataclass
class Restored:
    target: Lab
    plan: Plan
    manifest: Manifest
    overrides: dict[str, dict[str, Any]]
    restore_started: float  # monotonic: the run's clock starts here

    @property
    def api(self) -> Any:
        server = self.target["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        return config.new_client_from_config(config_file=str(server.admin_kubeconfig))

    @property
    def bucket(self) -> Any:
        minio = self.target.first("minio")
        assert isinstance(minio, MinioServer)
        return minio.client()

    def check(self, **spec: Any) -> TimedCheck:
        """Run one check of the given spec after the restore, on the restore's clock."""
        plan = Plan.model_validate({**self.plan.model_dump(by_alias=True), "checks": [{"id": "it", **spec}]})
        clock = lambda: time.monotonic() - self.restore_started  # noqa: E731
        (result,) = run_checks(plan, self.overrides, self.manifest, clock=clock)
        return result


def certificates_ready(api: Any) -> bool:
    items = client.CustomObjectsApi(api).list_cluster_custom_object("cert-manager.io", "v1", "certificates")["items"]
    ready = [c for c in items if is_true(c, "Ready")]  # a fresh Certificate has no status yet
    return bool(items) and len(ready) == len(items)


@pytest.fixture(scope="module")
def restored(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restored]:
    source, target = Lab("platform-source", lab_root), Lab("platform-target", lab_root)
    work = tmp_path_factory.mktemp("platform")
    kubernetes, checkpoints = get_plugin("kubernetes"), get_plugin("checkpoints")
    try:
        source.up(LIVING_KINDS)
        server = source["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        kube_seed.seed(server.access())
        trained = lab_support("checkpoints").seed(source)  # type: ignore[union-attr]  # the trainer killed mid-save
        api = config.new_client_from_config(str(server.admin_kubeconfig))
        wait_for(lambda: certificates_ready(api), "every Certificate issued", timeout=90)
        repo = Repository.init(LocalBackend(work / "store"), passphrase=PASSPHRASE)
        cluster = {"kubeconfig": str(server.readonly_kubeconfig), "exclude_resources": INSTALLED}
        manifest = run_backup(repo, [kubernetes, checkpoints], {"kubernetes": cluster, "checkpoints": trained})
        assert manifest.status == "complete"
        source.down()  # the source is gone for good; one living lab at a time
        target.up([*LIVING_KINDS, "minio"])
        minio = target.first("minio")
        assert isinstance(minio, MinioServer)
        minio.create_bucket(TARGET_BUCKET)
        (work / "plan.yaml").write_text(PLAN)
        loaded = load_plan(work / "plan.yaml")
        admin = {"kubeconfig": str(target["kube-apiserver"].admin_kubeconfig)}  # type: ignore[attr-defined]
        restored = {"url": f"s3://{TARGET_BUCKET}/runs", "endpoint_url": minio.api_url}
        restored["credentials_file"] = str(minio.credentials_file())
        overrides = {"kubernetes": admin, "checkpoints": restored}
        started = time.monotonic()
        run = Executor(loaded, repo, manifest, overrides=overrides).execute()
        assert run.steps["checkpoints"].status == "ok", run.steps["checkpoints"]
        yield Restored(target, loaded.require(), manifest, overrides, started)
    finally:
        target.down()
        source.down()


def pool(flavor: str) -> set[str]:
    found = next(p for p in node_pools() if p.get("flavor") == flavor)
    return {f"{found['name']}-{i}" for i in range(found["nodes"])}


def test_every_platform_check_passes_on_the_restored_living_cluster(restored: Restored) -> None:
    specs = [
        {"id": "admits", "type": "kueue-admits", "namespace": "team-vision", "queue": "vision-queue", "flavor": "a100"},
        {"id": "serving", "type": "workloads-ready"},
        {"id": "certificates", "type": "no-reissue", "window": "10s"},
        {"id": "gc", "type": "gc-stable", "window": "10s"},
        {"id": "training", "type": "training-resumes", "step": "checkpoints", "folder": "mlp", "trainer": TRAINER},
    ]
    plan = Plan.model_validate({**restored.plan.model_dump(by_alias=True), "checks": specs})
    clock = lambda: time.monotonic() - restored.restore_started  # noqa: E731
    started = time.monotonic()
    results = {c.name: c for c in run_checks(plan, restored.overrides, restored.manifest, clock=clock)}
    took = time.monotonic() - started
    assert all(c.ok for c in results.values()), {n: c.detail for n, c in results.items() if not c.ok}
    one_after_another = sum(c.finished_s - c.started_s for c in results.values())  # two 10 s windows at least
    assert took < one_after_another, "the checks wait side by side, not one after another"  # at any load
    admits = results["admits"]
    assert admits.facts["flavor"] == "a100" and admits.facts["node"] in pool("a100")
    assert "admitted by ClusterQueue cq-vision onto a100" in admits.detail
    assert results["serving"].facts["workloads"] >= len(kube_seed.TEAMS)  # a model server per team, at least
    chains = results["gc"].facts["owner_chains"]
    assert chains["Deployment -> ReplicaSet -> Pod"] == 2 * len(kube_seed.TEAMS)  # built by the controllers
    assert chains["Deployment -> ConfigMap -> Secret"] == len(kube_seed.TEAMS)  # restored with new uids
    # the seed's TrainJob -> JobSet chain is Trainer's to rebuild (drtool/kube/skips.py); no Trainer runs here
    assert "TrainJob -> JobSet" not in results["gc"].facts["custom_resource_owners"]
    training = results["training"].facts
    assert (training["resumed_from_step"], training["complete_steps"], training["torn_steps"]) == (20, [10, 20], [30])
    assert training["steps_lost_at_least"] == 10
    for check in results.values():  # on the run's clock: started after the restore, green before finished
        assert check.started_s > 0 and check.green_s is not None and check.started_s <= check.green_s
        assert check.green_s <= check.finished_s
    assert results["certificates"].finished_s - results["certificates"].started_s >= 10  # its window watched
    # the probes are gone again
    wait_for(lambda: not _probe_jobs(restored.api), "the probe Job deleted")
    names = [c.metadata.name for c in client.CoreV1Api(restored.api).list_config_map_for_all_namespaces().items]
    assert not [n for n in names if n.startswith("drtool-gc-probe-")]


def _probe_jobs(api: Any) -> list[str]:
    jobs = client.BatchV1Api(api).list_job_for_all_namespaces().items
    return [j.metadata.name for j in jobs if j.metadata.name.startswith("drtool-probe-")]


@pytest.mark.parametrize("name", ["full-cluster-rebuild", "training-resume", "kueue-quotas-only"])
def test_the_shipped_plans_checks_pass_on_the_restored_living_cluster(
    restored: Restored, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRTOOL_VAR_CHECK_WINDOW", "5s")  # a minute in production
    plan = load_plan(PLANS / f"{name}.yaml").require()
    overrides = {**restored.overrides, "kueue": restored.overrides["kubernetes"]}
    results = run_checks(plan, overrides, restored.manifest)
    assert all(c.ok for c in results), {c.name: c.detail for c in results if not c.ok}
    kinds = {c.type for c in plan.checks}
    assert "kueue-admits" in kinds and (name != "training-resume" or "training-resumes" in kinds)
    assert not [c for c in results if c.facts.get("skipped")]  # the checkpoints were restored: nothing skipped


def test_kueue_admits_fails_naming_the_inactive_cluster_queue(restored: Restored) -> None:
    """cq-nlp keeps an AdmissionCheck whose controller (queued provisioning) the new cluster does not run."""
    result = restored.check(type="kueue-admits", namespace="team-nlp", queue="nlp-queue", flavor="h100", timeout="10s")
    assert not result.ok and result.green_s is None
    assert "not admitted within 10.0s" in result.detail
    assert "ClusterQueue cq-nlp is inactive: AdmissionCheckInactive" in result.detail, result.detail
    assert "gpu-provisioning" in result.detail
    wait_for(lambda: not _probe_jobs(restored.api), "the probe Job deleted")


def test_workloads_ready_fails_naming_the_pod_that_cannot_run(restored: Restored) -> None:
    apps = client.AppsV1Api(restored.api)
    gpus = [{"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"}]
    apps.patch_namespaced_deployment("model-server", "team-speech", [{**gpus[0], "value": "9"}])  # no node has 9

    def refused() -> bool:  # the controllers and the scheduler take their time under load: not the check's 10 s
        pods = client.CoreV1Api(restored.api).list_namespaced_pod("team-speech", label_selector="app=model-server")
        conditions = [c for p in pods.items for c in p.status.conditions or [] if c.type == "PodScheduled"]
        return any(c.status == "False" and "Insufficient nvidia.com/gpu" in (c.message or "") for c in conditions)

    try:
        wait_for(refused, "the scheduler's refusal of the pod asking for 9 GPUs", 180)
        result = restored.check(type="workloads-ready", timeout="10s")
        assert not result.ok
        assert "Deployment team-speech/model-server" in result.detail, result.detail
        assert "Pending" in result.detail and "Insufficient nvidia.com/gpu" in result.detail
    finally:
        apps.patch_namespaced_deployment("model-server", "team-speech", [{**gpus[0], "value": "1"}])
    assert restored.check(type="workloads-ready", timeout="60s").ok


def test_no_reissue_fails_when_cert_manager_issues_a_restored_certificate_again(restored: Restored) -> None:
    """A restore that lost a certificate's Secret: cert-manager issues it anew (revision 2)."""
    client.CoreV1Api(restored.api).delete_namespaced_secret("vision-serving-tls", "team-vision")
    result = restored.check(type="no-reissue", window="10s", timeout="30s")
    assert not result.ok and result.facts["reissued"] == ["team-vision/vision-serving"]
    assert "re-issued Certificate team-vision/vision-serving: CertificateRequest team-vision/vision-serving-2" in (
        result.detail
    )
    assert "revision 2" in result.detail and "Secret does not exist" in result.detail, result.detail


def test_gc_stable_fails_when_the_collector_deletes_a_restored_object(restored: Restored) -> None:
    """A dependent restored with its owner's uid from the old cluster (what a restore that does not remap
    owner references writes): the collector deletes it. A finalizer holds it so the test sees it go."""
    core = client.CoreV1Api(restored.api)
    stale = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "model-server", "uid": str(uuid.uuid4())}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "stale-owner", "finalizers": ["example.com/hold"], "ownerReferences": [stale]},
        "data": {"restored": "with the old cluster's owner uid"},
    }
    core.create_namespaced_config_map("team-nlp", body, field_manager="drtool")  # as drtool's restore writes
    try:
        result = restored.check(type="gc-stable", window="5s")
        assert not result.ok and "ConfigMap team-nlp/stale-owner" in result.detail, result.detail
        assert f"uid {stale['uid']} does not exist" in result.detail or "being deleted" in result.detail
        assert core.read_namespaced_config_map("stale-owner", "team-nlp").metadata.deletion_timestamp  # the GC acted
    finally:
        core.patch_namespaced_config_map("stale-owner", "team-nlp", {"metadata": {"finalizers": None}})


@pytest.mark.parametrize(
    ("lost", "resumed", "why"),
    [((20,), 10, "resumed from step 10, but the last complete checkpoint is step 20"),
     ((20, 10), 0, "resumed from step 0 (from scratch), but the last complete checkpoint is step 20")],
)  # fmt: skip
def test_training_resumes_fails_from_the_wrong_step(
    restored: Restored, lost: tuple[int, ...], resumed: int, why: str
) -> None:
    """The restored checkpoints lose their markers: the job resumes from an older one, or from scratch."""
    keys = [f"runs/mlp/step-{step:06d}/model.safetensors.index.json" for step in lost]
    kept = {k: restored.bucket.get_object(Bucket=TARGET_BUCKET, Key=k)["Body"].read() for k in keys}
    for key in keys:
        restored.bucket.delete_object(Bucket=TARGET_BUCKET, Key=key)
    try:
        result = restored.check(type="training-resumes", step="checkpoints", folder="mlp", trainer=TRAINER)
        assert not result.ok and result.detail == why
        assert result.facts["resumed_from_step"] == resumed and result.facts["recovery_step"] == 20
    finally:
        for key, data in kept.items():
            restored.bucket.put_object(Bucket=TARGET_BUCKET, Key=key, Body=data)
    assert restored.check(type="training-resumes", step="checkpoints", folder="mlp", trainer=TRAINER).ok


# --- without a cluster ----------------------------------------------------------------------------------


def backup_of(checkpoints: dict[str, float], skipped: list[str], source: str = "training") -> Manifest:
    """A manifest as the checkpoints plugin writes it: one artifact per object, the torn ones in ``skipped``."""
    artifacts = [
        ArtifactEntry(plugin="checkpoints", name=f"{source}/{name}/{file}", size=1, sha256="0" * 64, chunks=[],
                      meta={"source": source, "checkpoint": name, "step": int(name.rsplit("-", 1)[1]),
                            "mtime": written - (file != "model.safetensors.index.json")})
        for name, written in checkpoints.items() for file in ("model-00001-of-00001.safetensors",
                                                              "model.safetensors.index.json")
    ]  # fmt: skip
    meta = {"skipped": [{"source": source, "checkpoint": name, "reason": "torn"} for name in skipped]}
    outcome = PluginOutcome(status="ok", started="2026-12-01T00:00:00Z", finished="2026-12-01T00:01:00Z", meta=meta)
    return Manifest(
        id="20261201T000000Z-abcdef", store_id="s", started="2026-12-01T00:00:00Z", finished="2026-12-01T00:01:00Z",
        status="complete", hostname="h", drtool_version="0", plugins={"checkpoints": outcome}, artifacts=artifacts,
    )  # fmt: skip


def test_the_recovery_point_is_what_the_backup_recorded() -> None:
    manifest = backup_of({"mlp/step-000010": 1000.0, "mlp/step-000020": 2000.0, "other/step-000090": 9.0},
                         ["mlp/step-000030", "other/step-000100"])  # fmt: skip
    point = recovery_point(manifest, "checkpoints", "mlp")
    assert point == RecoveryPoint(20, 2000.0, (10, 20), (30,)) and point.steps_lost_at_least == 10
    assert recovery_point(manifest, "checkpoints", "training/mlp") == point  # several sources: under the source
    assert recovery_point(manifest, "checkpoints", "gone") is None


def test_a_resume_is_judged_by_step_parameters_and_losses() -> None:
    point = RecoveryPoint(20, None, (10, 20), (30,))
    reference = {"params_sha256": "p20", "losses": {"21": (1.5).hex(), "22": (1.25).hex()}}
    assert (
        compare(point, {"resumed_from_step": 20, "params_sha256": "p20", "losses": reference["losses"]}, reference)
        is None
    )
    torn = compare(point, {"resumed_from_step": 30}, reference)
    assert torn == "resumed from step 30 (the torn checkpoint), but the last complete checkpoint is step 20"
    drift = {"resumed_from_step": 20, "params_sha256": "p20", "losses": {"21": (1.5).hex(), "22": (1.2500001).hex()}}
    assert compare(point, drift, reference) == "loss at step 22 is 1.2500001, an uninterrupted run's is 1.25"
    other = compare(point, {"resumed_from_step": 20, "params_sha256": "p21", "losses": {}}, reference)
    assert other == "the parameters loaded at step 20 differ from an uninterrupted run's at that step"


def test_platform_checks_are_strict_and_a_check_of_a_skipped_step_is_skipped(tmp_path: Path) -> None:
    """Each platform check is its plugin's (the platform_checks hook): `plan validate` checks its keys against the
    plugin's model; a check naming a step the plan does not have is refused by the schema itself."""
    base = {"name": "p", "steps": [{"id": "checkpoints", "uses": "checkpoints", "optional": True}]}
    typo = {"type": "kueue-admits", "id": "a", "namespace": "n", "queue": "q", "flavour": "a100"}
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps({**base, "checks": [typo]}))
    problems = [p.message for p in check_file(path, load_plugins()).errors]
    assert problems == ["checks[0] (a): check key 'flavour' is unknown; did you mean 'flavor'?"]
    with pytest.raises(ValueError, match="names step 'restore-checkpoints', which the plan does not have"):
        Plan.model_validate({**base, "checks": [{"type": "training-resumes", "id": "t", "step": "restore-checkpoints",
                                                 "folder": "mlp", "trainer": TRAINER}]})  # fmt: skip
    check = {"type": "gc-stable", "id": "g", "window": "1m30s", "namespaces": None}
    assert contributed(load_plugins())["gc-stable"].settings.model_validate(check).window.total_seconds() == 90
    training = {"type": "training-resumes", "id": "t", "step": "checkpoints", "folder": "mlp", "trainer": TRAINER}
    plan = Plan.model_validate({**base, "checks": [training]})
    manifest = backup_of({}, []).model_copy(update={"plugins": {}})  # the checkpoints plugin is not in the backup
    (result,) = run_checks(plan, {}, manifest)
    assert result.ok and result.facts == {"skipped": True} and result.green_s is None
    assert result.detail == "skipped: step checkpoints did not run (plugin not in backup)"
