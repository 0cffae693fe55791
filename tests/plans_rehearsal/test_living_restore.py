"""Restores into a living cluster: verification that holds while controllers, Kueue and cert-manager run, and
the plan's platform checks judged there.

One source and one target for the module, never both up at once: a living lab is seeded through the plugins'
lab support (kubernetes, kueue, dns-certs, and checkpoints: a training job killed while it saves a checkpoint),
left to run until its platform has acted on the seed (the Deployments' ReplicaSets and Pods, the StatefulSets'
Pods, Kueue's Workloads and admissions, cert-manager's issuances), backed up, and stopped. A second living lab
is the target; the restore into it is done once (``restored``: dns-certs, then every object, as the full-rebuild
plan orders them, then a plan's checkpoints and cluster-objects steps run by the executor), and each test reads
what the target's platform did with it, through the official ``kubernetes`` client. Writes a test makes to show
drift are undone by restoring again.

The platform checks (``--- platform checks``) run last: every check passes, then each is made to fail for the
reason it exists: an inactive ClusterQueue, a pod that cannot be scheduled, a re-issued certificate, an object
the garbage collector deletes, a training run resuming from the wrong step. They had a source and target of
their own in tests/plans_rehearsal/test_platform_checks.py (75.7 CPU-s and 96.0 here, 2026-12-06: one living
source, backup and target fewer now).
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
from drtool_lab.components.kueue import KueueController
from drtool_lab.components.kwok import node_pools
from drtool_lab.components.minio import MinioServer
from drtool_lab.lab import Lab
from drtool_lab.support import lab_support
from kubernetes import client, config

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.kube.holds import COMPLETED, HELD
from drtool.kube.readings import is_true
from drtool.plans.checks import run_checks
from drtool.plans.executor import Executor
from drtool.plans.loader import load_plan
from drtool.plans.platform.context import TimedCheck
from drtool.plans.schema import Plan
from drtool.plugin.contract import Check
from drtool.plugin.manager import get_plugin
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.restore import RestoreOutcome, run_restore
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import wait_for
from tests.plans_rehearsal.test_platform_checks import TRAINER

Obj = dict[str, Any]
PLUGINS = ("kubernetes", "kueue", "dns-certs", "checkpoints")
TEAMS = ("team-nlp", "team-vision", "team-speech", "research")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
CERT_MANAGER = ("cert-manager.io", "v1")
TARGET_BUCKET = "restored-checkpoints"  # the checkpoints plugin's lab target
PLAN = """
name: platform
parallelism: 2
steps:
  - {id: checkpoints, uses: checkpoints}
  - {id: cluster-objects, uses: kubernetes, with: {existing: update}}
"""
PLANS = Path(__file__).resolve().parents[2] / "restore-plans"


@dataclasses.dataclass
class Living:
    repo: Repository
    manifest: Manifest
    lab: Lab  # the target
    targets: dict[str, dict[str, Any]]
    work: Path

    @property
    def server(self) -> KubeApiserver:
        server = self.lab["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        return server

    def api(self) -> Any:
        return config.new_client_from_config(config_file=str(self.server.admin_kubeconfig))

    def restore(self, plugin: str, **options: Any) -> RestoreOutcome:
        return run_restore(self.repo, self.manifest, get_plugin(plugin), self.targets[plugin], options=options)

    def verify(self, plugin: str, **options: Any) -> list[Check]:
        ctx = PluginRestoreContext(self.repo, self.manifest, plugin)
        return get_plugin(plugin).verify(ctx, self.targets[plugin], options)

    def patch(self, path: str, body: Obj, manager: str, kind: str = "merge") -> None:
        """Write as another field manager would (an HPA, a person's kubectl, a GitOps controller)."""
        content = {"merge": "application/merge-patch+json", "apply": "application/apply-patch+yaml"}[kind]
        params = {"fieldManager": manager} | ({"force": "true"} if kind == "apply" else {})
        with self.server.access().session() as s:
            resp = s.patch(self.server.url + path, params=params, data=json.dumps(body),
                           headers={"Content-Type": content}, timeout=30)  # fmt: skip
            assert resp.ok, resp.text


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


def platform_settled(api: Any) -> bool:
    """The source's platform has acted on the seed: workloads running, Kueue's jobs admitted or held,
    cert-manager's certificates issued."""
    apps, batch, custom = client.AppsV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
    deployments = [d for ns in TEAMS for d in apps.list_namespaced_deployment(ns).items]
    if not deployments or any((d.status.available_replicas or 0) < d.spec.replicas for d in deployments):
        return False
    if any(
        (s.status.ready_replicas or 0) < s.spec.replicas
        for ns in TEAMS
        for s in apps.list_namespaced_stateful_set(ns).items
    ):
        return False
    jobs = [j for ns in TEAMS for j in batch.list_namespaced_job(ns).items]
    done = [j for j in jobs if j.status.succeeded or j.spec.suspend]
    workloads = [w for ns in TEAMS for w in custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]]
    certificates = [
        c for ns in TEAMS for c in custom.list_namespaced_custom_object(*CERT_MANAGER, ns, "certificates")["items"]
    ]
    ready = [c for c in certificates if is_true(c, "Ready")]
    return len(done) == len(jobs) == len(TEAMS) == len(workloads) and len(ready) == len(certificates) > 0


@pytest.fixture(scope="module")
def living(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Living]:
    plugins = [get_plugin(name) for name in PLUGINS]
    source = Lab("lv-source", root=lab_root)
    try:
        sources = {p.name: lab_support(p.name).seed(source) for p in plugins}  # type: ignore[union-attr]
        server = source["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        api = config.new_client_from_config(config_file=str(server.admin_kubeconfig))
        wait_for(lambda: platform_settled(api) and certificates_ready(api), "the source's platform acting on the seed",
                 timeout=180)  # fmt: skip
        work = tmp_path_factory.mktemp("living")
        repo = Repository.init(LocalBackend(work / "store"), passphrase=PASSPHRASE)
        manifest = run_backup(repo, plugins, sources)
        assert manifest.status == "complete"
    finally:
        source.down()  # the cluster is lost; only the store remains
    target = Lab("lv-target", root=lab_root)
    try:
        targets = {p.name: lab_support(p.name).target(target) for p in plugins}  # type: ignore[union-attr]
        yield Living(repo, manifest, target, targets, work)
    finally:
        target.down()


@pytest.fixture(scope="module")
def restores(living: Living) -> tuple[RestoreOutcome, Restored]:
    """In the order of restore-plans/full-cluster-rebuild.yaml: dns-certs first (it creates kube-dns with the
    backup's ClusterIP), then every object; then a plan's checkpoints step, and its cluster-objects step (every
    object again, unchanged), run by the executor, on whose clock the platform checks run."""
    started = time.monotonic()
    dns = living.restore("dns-certs")
    assert dns.verified, [(c.name, c.detail) for c in failed(dns.checks)]
    outcome = living.restore("kubernetes")
    (living.work / "plan.yaml").write_text(PLAN)
    loaded = load_plan(living.work / "plan.yaml")
    overrides = {"kubernetes": living.targets["kubernetes"], "checkpoints": living.targets["checkpoints"]}
    run = Executor(loaded, living.repo, living.manifest, overrides=overrides).execute()
    assert {s: run.steps[s].status for s in run.steps} == {"checkpoints": "ok", "cluster-objects": "ok"}, run.steps
    return outcome, Restored(living.lab, loaded.require(), living.manifest, overrides, started)


@pytest.fixture(scope="module")
def restored(restores: tuple[RestoreOutcome, Restored]) -> RestoreOutcome:
    """The restore of every object into the living target (dns-certs before it)."""
    return restores[0]


@pytest.fixture(scope="module")
def platform(restores: tuple[RestoreOutcome, Restored]) -> Restored:
    """The restored living cluster, for the plan's platform checks."""
    return restores[1]


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# --- the backup of a living cluster --------------------------------------------------------------------------


def test_the_backup_leaves_what_controllers_recreate_to_them(living: Living) -> None:
    meta = living.manifest.plugins["kubernetes"].meta
    resources = meta["resources"]
    names = {a.name for a in living.manifest.artifacts_of("kubernetes")}
    for key in ("pods", "replicasets.apps", "workloads.kueue.x-k8s.io", "certificaterequests.cert-manager.io"):
        assert resources[key]["count"] == 0 and resources[key]["left_to_controllers"] > 0, (key, resources[key])
    # a Deployment's two pods, a StatefulSet's one and an admitted Job's one, per team; each pod recorded
    assert resources["pods"]["left_to_controllers"] >= 3 * len(TEAMS)
    assert "left/core/pods.ndjson" in names and "resources/core/pods.ndjson" not in names
    endpoint_slices = resources["endpointslices.discovery.k8s.io"]
    assert endpoint_slices["count"] == 0 and endpoint_slices["left_to_controllers"] >= 2 * len(TEAMS)
    assert "nodes" in meta["skipped_resources"] and "leases.coordination.k8s.io" in meta["skipped_resources"]
    # what the platform's install registered is backed up (it is part of the cluster) but kept from the target's
    assert resources["mutatingwebhookconfigurations.admissionregistration.k8s.io"]["count"] == 1
    # the Kueue Jobs' pod templates carry what the source's Kueue injected on admission
    assert resources["jobs.batch"]["count"] == len(TEAMS)


# --- the restore into a living target ------------------------------------------------------------------------


def test_a_restore_into_a_living_target_verifies_ok(living: Living, restored: RestoreOutcome) -> None:
    assert restored.verified, [(c.name, c.detail) for c in failed(restored.checks)]
    assert "kept from the target's own install" in restored.result.summary
    checks = by_name(restored.checks)
    # the deployment controller writes its revision annotation at once; it is the target's, not drift
    assert checks["kubernetes: deployments.apps"].ok
    left = checks["kubernetes: left to controllers"]
    assert "pods" in left.detail and "Deployment via ReplicaSet" in left.detail and "StatefulSet" in left.detail
    assert "workloads.kueue.x-k8s.io" in left.detail and "Job" in left.detail
    assert "owner missing" not in left.detail
    # Kueue's webhooks: the target's own registration kept, pointing at the target's Kueue, which answers
    webhooks = checks["kubernetes: mutatingwebhookconfigurations.admissionregistration.k8s.io"]
    assert "1 of them the target's own install" in webhooks.detail and "answers" in webhooks.detail
    kueue = living.lab["kueue"]
    assert isinstance(kueue, KueueController)
    api = client.AdmissionregistrationV1Api(living.api())
    urls = {h.client_config.url for c in api.list_mutating_webhook_configuration().items for h in c.webhooks}
    assert urls and all(f"127.0.0.1:{kueue.webhook_port}/" in u for u in urls)
    again = living.restore("kubernetes")
    assert again.verified and not again.result.changed, again.result.summary


def test_owner_chains_survive_the_garbage_collector(living: Living, restored: RestoreOutcome) -> None:
    api = living.api()
    apps, core, custom = client.AppsV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    for ns in TEAMS:
        deployment = apps.read_namespaced_deployment("model-server", ns)

        def running(ns: str = ns) -> list[Any] | None:
            pods = [p for p in core.list_namespaced_pod(ns, label_selector="app=model-server").items
                    if p.status.phase == "Running"]  # fmt: skip
            return pods if len(pods) == 2 else None

        pods = wait_for(running, f"the restored Deployment's pods in {ns}")
        (rs,) = apps.list_namespaced_replica_set(ns, label_selector="app=model-server").items
        assert rs.metadata.owner_references[0].uid == deployment.metadata.uid  # Deployment -> ReplicaSet
        assert {p.metadata.owner_references[0].uid for p in pods} == {rs.metadata.uid}  # -> Pod
    time.sleep(5)  # the garbage collector has seen every restored owner reference by now
    for ns in TEAMS:
        deployment = apps.read_namespaced_deployment("model-server", ns)
        config_map = core.read_namespaced_config_map("model-server-config", ns)  # restored, owned by the Deployment
        assert config_map.metadata.owner_references[0].uid == deployment.metadata.uid
        trainjob = custom.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", ns, "trainjobs",
                                                       f"{ns.removeprefix('team-')}-pretrain")  # fmt: skip
        # its JobSet is Trainer's to make again from the held TrainJob (drtool/kube/skips.py): not restored
        jobsets = custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets")["items"]
        assert trainjob["metadata"]["name"] not in {j["metadata"]["name"] for j in jobsets}


def test_restored_jobs_are_held_and_a_completed_one_is_never_run_again(
    living: Living, restored: RestoreOutcome
) -> None:
    """A Job that completed in the source is restored as a record (suspended, marked, never released); a Kueue
    Job still waiting in the source is restored held: suspended and without its queue label, so the target's
    Kueue leaves it alone until a release step gives the label back (docs/restore-into-another-cluster.md)."""
    api = living.api()
    batch, custom = client.BatchV1Api(api), client.CustomObjectsApi(api)
    done = batch.read_namespaced_job("vision-eval-batch", "team-vision")
    assert done.spec.suspend and COMPLETED in done.metadata.annotations
    held = batch.read_namespaced_job("nlp-eval-batch", "team-nlp")
    assert held.spec.suspend and "kueue.x-k8s.io/queue-name" not in (held.metadata.labels or {})
    assert HELD in held.metadata.annotations
    for job, ns in ((done, "team-vision"), (held, "team-nlp")):
        workloads = custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
        assert not [w for w in workloads if w["metadata"]["ownerReferences"][0]["uid"] == job.metadata.uid]
    jobs = by_name(living.verify("kubernetes", settle=0))["kubernetes: jobs.batch"]
    assert jobs.ok, jobs.detail


def test_drift_by_another_manager_fails_and_names_the_field_and_the_manager(
    living: Living, restored: RestoreOutcome
) -> None:
    deployment = "/apis/apps/v1/namespaces/team-nlp/deployments/model-server"
    living.patch(deployment, {"spec": {"replicas": 5}}, "horizontal-pod-autoscaler")
    annotation = {"metadata": {"annotations": {"argocd.argoproj.io/tracking-id": "ml:apps/Deployment"}}}
    living.patch("/apis/apps/v1/namespaces/team-vision/deployments/model-server", annotation, "argocd-controller")
    try:
        checks = living.verify("kubernetes", settle=0)
        (bad,) = failed(checks)
        assert bad.name == "kubernetes: deployments.apps"
        assert "differ: team-nlp/model-server" in bad.detail
        assert (
            "drift: team-nlp/model-server spec.replicas: backup 2, target 5 by horizontal-pod-autoscaler (Update"
            in (bad.detail)
        )
        # what another manager added to a restored object is listed with it, and does not fail
        assert 'argocd-controller: metadata.annotations["argocd.argoproj.io/tracking-id"] (1)' in bad.detail
        assert "team-vision/model-server" not in bad.detail.split("\n")[1]
    finally:
        living.restore("kubernetes")  # server-side apply gives spec.replicas back to the backup's value
    assert by_name(living.verify("kubernetes", settle=0))["kubernetes: deployments.apps"].ok


def test_a_field_drtool_wrote_that_differs_from_the_backup_fails(living: Living, restored: RestoreOutcome) -> None:
    """The target holds drtool's writes of another state (another backup restored over it): still drift."""
    path = "/api/v1/namespaces/team-speech/configmaps/feature-flags"
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "feature-flags", "namespace": "team-speech"},
             "data": {"mixed_precision": "fp8", "flash_attention": "true", "compile": "max-autotune"}}  # fmt: skip
    living.patch(path, other, "drtool", kind="apply")
    try:
        (bad,) = failed(living.verify("kubernetes", settle=0))
        assert bad.name == "kubernetes: configmaps"
        assert "data.mixed_precision: backup 'bf16', target 'fp8' by drtool (Apply" in bad.detail
        assert "written by drtool, not in this backup: team-speech/feature-flags data.compile" in bad.detail
    finally:
        living.restore("kubernetes")
    assert not failed(living.verify("kubernetes", settle=0))


def test_cli_restore_exits_0_unchanged_and_non_zero_naming_the_field(
    living: Living, restored: RestoreOutcome, cli: Cli
) -> None:
    store = ["--store", living.repo.backend.url]
    kubeconfig = f"kubeconfig={living.targets['kubernetes']['kubeconfig']}"
    restore = [*store, "restore", living.manifest.id, "-p", "kubernetes", "-t", kubeconfig]
    ok = cli(*restore)
    assert ok.returncode == 0, ok.stderr
    assert "0 created, 0 changed" in ok.stdout
    living.patch("/api/v1/namespaces/research/configmaps/training-config", {"data": {"checkpoint_uri": "s3://x/"}},
                 "kubectl-edit")  # fmt: skip
    try:
        # existing=skip leaves the edited object as it is: the target really differs from the backup
        bad = cli(*restore, "-o", "existing=skip", "-o", "settle=0")
        assert bad.returncode == 7, bad.stdout
        assert "FAILED kubernetes: configmaps" in bad.stdout
        assert (
            "research/training-config data.checkpoint_uri: backup 's3://ml-checkpoints/research/', target" in bad.stdout
        )
        assert "by kubectl-edit" in bad.stdout
        assert bad.stderr.startswith(
            "drtool: error: restored kubernetes, but verification failed: kubernetes: configmaps"
        )
    finally:
        living.restore("kubernetes")


# --- the other plugins whose target runs controllers ---------------------------------------------------------


def test_kueue_restores_into_a_living_target_and_verifies_ok(living: Living, restored: RestoreOutcome) -> None:
    outcome = living.restore("kueue", allow_missing="kubeconfig-secret")  # the sample MultiKueue worker's Secret
    assert outcome.verified, [(c.name, c.detail) for c in failed(outcome.checks)]
    active = by_name(outcome.checks)["kueue: ClusterQueues Active"]
    # Kueue's own verdict: every queue active but team-nlp's, inactive in the source too, for the same reason
    assert "inactive in the source too, for the same reason: cq-nlp" in active.detail


def test_dns_certs_restores_into_a_living_target_without_reissue(living: Living, restored: RestoreOutcome) -> None:
    outcome = living.restore("dns-certs", externaldns="hold", rto="4h")
    assert outcome.verified, [(c.name, c.detail) for c in failed(outcome.checks)]
    checks = by_name(outcome.checks)
    assert checks["dns-certs: cert-manager would not re-issue"].ok
    time.sleep(5)  # cert-manager has had its look at every restored Certificate
    custom = client.CustomObjectsApi(living.api())
    requests = custom.list_namespaced_custom_object(*CERT_MANAGER, "ml-serving", "certificaterequests")["items"]
    assert requests == []  # no issuance started for the restored certificates
    certificates = custom.list_namespaced_custom_object(*CERT_MANAGER, "ml-serving", "certificates")["items"]
    assert {c["status"]["revision"] for c in certificates} == {1}


# --- platform checks on the restored living cluster (they change it: last) ----------------------------------


def pool(flavor: str) -> set[str]:
    found = next(p for p in node_pools() if p.get("flavor") == flavor)
    return {f"{found['name']}-{i}" for i in range(found["nodes"])}


def test_every_platform_check_passes_on_the_restored_living_cluster(platform: Restored) -> None:
    specs = [
        {"id": "admits", "type": "kueue-admits", "namespace": "team-vision", "queue": "vision-queue", "flavor": "a100"},
        {"id": "serving", "type": "workloads-ready"},
        {"id": "certificates", "type": "no-reissue", "window": "10s"},
        {"id": "gc", "type": "gc-stable", "window": "10s"},
        {"id": "training", "type": "training-resumes", "step": "checkpoints", "folder": "mlp", "trainer": TRAINER},
    ]
    plan = Plan.model_validate({**platform.plan.model_dump(by_alias=True), "checks": specs})
    clock = lambda: time.monotonic() - platform.restore_started  # noqa: E731
    started = time.monotonic()
    results = {c.name: c for c in run_checks(plan, platform.overrides, platform.manifest, clock=clock)}
    took = time.monotonic() - started
    assert all(c.ok for c in results.values()), {n: c.detail for n, c in results.items() if not c.ok}
    one_after_another = sum(c.finished_s - c.started_s for c in results.values())  # two 10 s windows at least
    assert took < one_after_another, "the checks wait side by side, not one after another"  # at any load
    admits = results["admits"]
    assert admits.facts["flavor"] == "a100" and admits.facts["node"] in pool("a100")
    assert "admitted by ClusterQueue cq-vision onto a100" in admits.detail
    assert results["serving"].facts["workloads"] >= len(kube_seed.TEAMS)  # a model server per team, at least
    chains = results["gc"].facts["owner_chains"]
    # built by the controllers: two model-server pods per team, and the dns-certs seed's external-dns pod
    assert chains["Deployment -> ReplicaSet -> Pod"] == 2 * len(kube_seed.TEAMS) + 1
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
    wait_for(lambda: not _probe_jobs(platform.api), "the probe Job deleted")
    names = [c.metadata.name for c in client.CoreV1Api(platform.api).list_config_map_for_all_namespaces().items]
    assert not [n for n in names if n.startswith("drtool-gc-probe-")]


def _probe_jobs(api: Any) -> list[str]:
    jobs = client.BatchV1Api(api).list_job_for_all_namespaces().items
    return [j.metadata.name for j in jobs if j.metadata.name.startswith("drtool-probe-")]


@pytest.mark.parametrize("name", ["full-cluster-rebuild", "training-resume", "kueue-quotas-only"])
def test_the_shipped_plans_checks_pass_on_the_restored_living_cluster(
    platform: Restored, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRTOOL_VAR_CHECK_WINDOW", "5s")  # a minute in production
    plan = load_plan(PLANS / f"{name}.yaml").require()
    overrides = {**platform.overrides, "kueue": platform.overrides["kubernetes"]}
    results = run_checks(plan, overrides, platform.manifest)
    assert all(c.ok for c in results), {c.name: c.detail for c in results if not c.ok}
    kinds = {c.type for c in plan.checks}
    assert "kueue-admits" in kinds and (name != "training-resume" or "training-resumes" in kinds)
    assert not [c for c in results if c.facts.get("skipped")]  # the checkpoints were restored: nothing skipped


def test_kueue_admits_fails_naming_the_inactive_cluster_queue(platform: Restored) -> None:
    """cq-nlp keeps an AdmissionCheck whose controller (queued provisioning) the new cluster does not run."""
    result = platform.check(type="kueue-admits", namespace="team-nlp", queue="nlp-queue", flavor="h100", timeout="10s")
    assert not result.ok and result.green_s is None
    assert "not admitted within 10.0s" in result.detail
    assert "ClusterQueue cq-nlp is inactive: AdmissionCheckInactive" in result.detail, result.detail
    assert "gpu-provisioning" in result.detail
    wait_for(lambda: not _probe_jobs(platform.api), "the probe Job deleted")


def test_workloads_ready_fails_naming_the_pod_that_cannot_run(platform: Restored) -> None:
    apps = client.AppsV1Api(platform.api)
    gpus = [{"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"}]
    apps.patch_namespaced_deployment("model-server", "team-speech", [{**gpus[0], "value": "9"}])  # no node has 9

    def refused() -> bool:  # the controllers and the scheduler take their time under load: not the check's 10 s
        pods = client.CoreV1Api(platform.api).list_namespaced_pod("team-speech", label_selector="app=model-server")
        conditions = [c for p in pods.items for c in p.status.conditions or [] if c.type == "PodScheduled"]
        return any(c.status == "False" and "Insufficient nvidia.com/gpu" in (c.message or "") for c in conditions)

    try:
        wait_for(refused, "the scheduler's refusal of the pod asking for 9 GPUs", 180)
        result = platform.check(type="workloads-ready", timeout="10s")
        assert not result.ok
        assert "Deployment team-speech/model-server" in result.detail, result.detail
        assert "Pending" in result.detail and "Insufficient nvidia.com/gpu" in result.detail
    finally:
        apps.patch_namespaced_deployment("model-server", "team-speech", [{**gpus[0], "value": "1"}])
    assert platform.check(type="workloads-ready", timeout="60s").ok


def test_no_reissue_fails_when_cert_manager_issues_a_restored_certificate_again(platform: Restored) -> None:
    """A restore that lost a certificate's Secret: cert-manager issues it anew (revision 2)."""
    client.CoreV1Api(platform.api).delete_namespaced_secret("vision-serving-tls", "team-vision")
    result = platform.check(type="no-reissue", window="10s", timeout="30s")
    assert not result.ok and result.facts["reissued"] == ["team-vision/vision-serving"]
    assert "re-issued Certificate team-vision/vision-serving: CertificateRequest team-vision/vision-serving-2" in (
        result.detail
    )
    assert "revision 2" in result.detail and "Secret does not exist" in result.detail, result.detail


def test_gc_stable_fails_when_the_collector_deletes_a_restored_object(platform: Restored) -> None:
    """A dependent restored with its owner's uid from the old cluster (what a restore that does not remap
    owner references writes): the collector deletes it. A finalizer holds it so the test sees it go."""
    core = client.CoreV1Api(platform.api)
    stale = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "model-server", "uid": str(uuid.uuid4())}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "stale-owner", "finalizers": ["example.com/hold"], "ownerReferences": [stale]},
        "data": {"restored": "with the old cluster's owner uid"},
    }
    core.create_namespaced_config_map("team-nlp", body, field_manager="drtool")  # as drtool's restore writes
    try:
        result = platform.check(type="gc-stable", window="5s")
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
    platform: Restored, lost: tuple[int, ...], resumed: int, why: str
) -> None:
    """The restored checkpoints lose their markers: the job resumes from an older one, or from scratch."""
    keys = [f"runs/mlp/step-{step:06d}/model.safetensors.index.json" for step in lost]
    kept = {k: platform.bucket.get_object(Bucket=TARGET_BUCKET, Key=k)["Body"].read() for k in keys}
    for key in keys:
        platform.bucket.delete_object(Bucket=TARGET_BUCKET, Key=key)
    try:
        result = platform.check(type="training-resumes", step="checkpoints", folder="mlp", trainer=TRAINER)
        assert not result.ok and result.detail == why
        assert result.facts["resumed_from_step"] == resumed and result.facts["recovery_step"] == 20
    finally:
        for key, data in kept.items():
            platform.bucket.put_object(Bucket=TARGET_BUCKET, Key=key, Body=data)
    assert platform.check(type="training-resumes", step="checkpoints", folder="mlp", trainer=TRAINER).ok
