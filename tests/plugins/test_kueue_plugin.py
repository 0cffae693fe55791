"""The kueue plugin against real kube-apiservers (lab: etcd + kube-apiserver, Kueue CRDs, no Kueue controller).

The seeded source (``kube_source``) holds Kueue's upstream samples and a team setup: 6 ResourceFlavors,
2 Topologies, 9 Cohorts in two trees, 6 ClusterQueues, 6 LocalQueues, 6 WorkloadPriorityClasses,
3 AdmissionChecks, 2 ProvisioningRequestConfigs, a MultiKueueConfig and a MultiKueueCluster — whose
kubeconfig Secret the seed does not create (as the upstream sample leaves it to the reader), so a restore
of it needs ``allow_missing=kubeconfig-secret``. The tests after the round trip build on its target, in
file order: diff, drift repair, the MultiKueue Secret added, then a ClusterQueue whose flavor is gone.

Reads that check a restore go through the official ``kubernetes`` client (``KubeLab.dynamic``), not the
plugin's own, so a bug there cannot hide in both the write and the check.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_plugins.kueue import KueuePlugin
from drtool_plugins.kueue.kinds import CONFIG, ORDER
from drtool_plugins.kueue.quotas import cohort_levels, same_quantity
from drtool_plugins.kueue.refs import RULE_NAMES, parse_allowed
from kubernetes import client as k8s

from drtool.errors import UsageError
from drtool.plugin.contract import Plugin
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import RestoreOutcome, restore_dependencies, run_restore
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab, start_kube_lab

plugin = KueuePlugin()
API = "kueue.x-k8s.io/v1beta2"
PLURALS = {
    "Topology": "topologies",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "MultiKueueCluster": "multikueueclusters",
    "MultiKueueConfig": "multikueueconfigs",
    "ProvisioningRequestConfig": "provisioningrequestconfigs",
    "AdmissionCheck": "admissionchecks",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
}
KINDS = dict.fromkeys(PLURALS, API)  # kind -> apiVersion, as KubeLab.list_objects takes them
SEED_ALLOW = {"allow_missing": "kubeconfig-secret"}  # the seeded MultiKueueCluster's Secret does not exist


# --- helpers ------------------------------------------------------------------------------------------


def settings(kube: KubeLab) -> dict[str, Any]:
    return {"kubeconfig": kube.kubeconfig}


def backup(repo: Repository, kube: KubeLab) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, settings(kube))
        assert outcome.status == "ok", outcome.error
        return session.commit()


def specs(kube: KubeLab) -> dict[str, dict[tuple[str, str], Any]]:
    """Every Kueue config object's declared content (spec, or value/description for priority classes)."""
    out = {}
    for kind, objs in kube.list_objects(KINDS).items():
        out[kind] = {key: {k: v for k, v in o.items() if k not in ("metadata", "status")} for key, o in objs.items()}
    return out


def versions(kube: KubeLab) -> dict[tuple[str, str, str], str]:
    return {
        (kind, *key): o["metadata"]["resourceVersion"]
        for kind, objs in kube.list_objects(KINDS).items()
        for key, o in objs.items()
    }


def resource(kube: KubeLab, kind: str) -> Any:
    return kube.dynamic().resources.get(api_version=API, kind=kind)


def set_gpu_quota(kube: KubeLab, queue: str, value: int) -> None:
    """nominalQuota of the queue's own GPU flavor (second resource group, first flavor) via a JSON patch."""
    patch = [{"op": "replace", "path": "/spec/resourceGroups/1/flavors/0/resources/0/nominalQuota", "value": value}]
    resource(kube, "ClusterQueue").patch(name=queue, body=patch, content_type="application/json-patch+json")


def failed(outcome: RestoreOutcome) -> list[Any]:
    return [c for c in outcome.checks if not c.ok]


def diff_cli(cli: Cli, repo: Repository, backup_id: str, kube: KubeLab, *extra: str) -> Any:
    store = repo.backend.url
    return cli("--store", store, "diff", backup_id, "--plugin", "kueue", "-t", f"kubeconfig={kube.kubeconfig}", *extra)


# --- fixtures: one backup of the seeded source, one empty target it is restored into ----------------


@pytest.fixture(scope="module")
def module_repo(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    from drtool.backends.local import LocalBackend

    return Repository.init(LocalBackend(tmp_path_factory.mktemp("kueue-store") / "store"), passphrase=PASSPHRASE)


@pytest.fixture(scope="module")
def seeded_backup(module_repo: Repository, kube_source: KubeLab) -> Manifest:
    return backup(module_repo, kube_source)


@pytest.fixture(scope="module")
def kueue_target(lab_root: Path) -> Iterator[KubeLab]:
    """An empty cluster (no Kueue CRDs either) that the module's round trip restores into."""
    kube = start_kube_lab(lab_root, "kueue-dst")
    yield kube
    kube.lab.down()


@pytest.fixture(scope="module")
def restored(module_repo: Repository, seeded_backup: Manifest, kueue_target: KubeLab) -> RestoreOutcome:
    return run_restore(module_repo, seeded_backup, plugin, settings(kueue_target), options=SEED_ALLOW)


# --- pure parts -----------------------------------------------------------------------------------------


def test_plugin_implements_the_contract() -> None:
    assert isinstance(plugin, Plugin) and plugin.name == "kueue"


def test_restore_order_is_kueues_dependency_order() -> None:
    order = [k.split(".")[0] for keys, _ in ORDER for k in keys]
    expected = ["topologies", "resourceflavors", "workloadpriorityclasses", "secrets", "multikueueclusters"]
    assert order[2:7] == expected
    assert order[-4:] == ["admissionchecks", "cohorts", "clusterqueues", "localqueues"]
    assert all(reason for _, reason in ORDER)
    assert "workloads.kueue.x-k8s.io" not in CONFIG


def test_docs_explain_every_kind_and_reference_rule() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "kueue.md").read_text()
    for kind in (*PLURALS, "Namespace", "Secret", "CRDs"):
        assert f"| {kind}" in docs or f", {kind}" in docs, kind
    for rule in RULE_NAMES:
        assert f"| `{rule}` |" in docs, rule


def test_cohorts_sort_parents_first_and_cycles_last() -> None:
    levels, stuck = cohort_levels({"org": "", "ml": "org", "nlp": "ml", "a": "b", "b": "a", "lost": "gone"})
    assert levels == [["lost", "org"], ["ml"], ["nlp"]] and stuck == ["a", "b"]


def test_quotas_compare_by_value() -> None:
    assert same_quantity("768Gi", 824633720832) and same_quantity(96, "96") and same_quantity(None, None)
    assert not same_quantity(None, 0) and not same_quantity("1Gi", "1G")


def test_allow_missing_names_reference_kinds() -> None:
    assert parse_allowed("true") == set(RULE_NAMES) and parse_allowed(None) == set()
    assert parse_allowed("flavor,cohort-parent") == {"flavor", "cohort-parent"}
    with pytest.raises(UsageError, match="flavour"):
        parse_allowed("flavour")


# --- backup ---------------------------------------------------------------------------------------------


def test_backup_holds_configuration_not_runtime_state(
    module_repo: Repository, seeded_backup: Manifest, kube_source: KubeLab
) -> None:
    meta = seeded_backup.plugins["kueue"].meta
    seeded = kube_source.list_objects(KINDS)
    assert {kind: meta["objects"][f"{plural}.kueue.x-k8s.io"] for kind, plural in PLURALS.items()} == {
        kind: len(objs) for kind, objs in seeded.items()
    }
    assert set(meta["api_versions"].values()) == {"v1beta2"}
    assert "workloads.kueue.x-k8s.io" in meta["not_backed_up"]
    names = {a.name for a in seeded_backup.artifacts_of("kueue")}
    assert "resources/kueue.x-k8s.io/clusterqueues.ndjson" in names
    assert not any("workloads" in n for n in names)
    assert meta["objects"]["namespaces"] == len({ns for ns, _ in seeded["LocalQueue"]})
    # the seed's MultiKueueCluster names a Secret nobody created: recorded at backup time already
    assert [m["target"] for m in meta["dangling_in_source"]] == ["Secret kueue-system/worker1-secret"]


def test_restore_refuses_an_unresolved_reference_before_writing(
    module_repo: Repository, seeded_backup: Manifest, lab_root: Path
) -> None:
    kube = start_kube_lab(lab_root, "kueue-refuse")
    try:
        with pytest.raises(UsageError, match="worker1-secret; nothing was written") as err:
            run_restore(module_repo, seeded_backup, plugin, settings(kube))
        assert "allow_missing=kubeconfig-secret" in (err.value.hint or "")
        crds = kube.dynamic().resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        assert not [c for c in crds.get().items if c.spec.group == "kueue.x-k8s.io"]  # not even the CRDs
    finally:
        kube.lab.down()


# --- the round trip: seeded source -> backup -> new empty cluster ----------------------------------------


def test_round_trip_into_an_empty_cluster(
    restored: RestoreOutcome, kube_source: KubeLab, kueue_target: KubeLab, seeded_backup: Manifest
) -> None:
    assert restored.result.changed and not failed(restored), failed(restored)
    details = restored.result.details
    assert "clusterqueues.kueue.x-k8s.io" in details["crds_installed"]
    assert [m["rule"] for m in details["missing_references"]] == ["kubeconfig-secret"]
    assert specs(kueue_target) == specs(kube_source)  # read back with the official client, both sides
    order = [entry.split(":")[0] for entry in details["order"]]
    assert order.index("resourceflavors.kueue.x-k8s.io") < order.index("clusterqueues.kueue.x-k8s.io")
    assert [o for o in order if o.startswith("cohorts")] == [f"cohorts.kueue.x-k8s.io depth {d}" for d in range(3)]
    names = {c.name: c for c in restored.checks}
    queues = len(specs(kube_source)["ClusterQueue"])
    no_controller = f"0 of {queues} ClusterQueues Active; {queues} without an Active condition"
    assert no_controller in names["kueue: ClusterQueues Active"].detail  # no Kueue controller in the lab
    assert re.match(r"(\d+) of \1 quota entries", names["kueue: quotas"].detail)


def test_second_restore_is_a_no_op(
    module_repo: Repository, seeded_backup: Manifest, restored: RestoreOutcome, kueue_target: KubeLab
) -> None:
    before = versions(kueue_target)
    started = time.monotonic()
    again = run_restore(module_repo, seeded_backup, plugin, settings(kueue_target), options=SEED_ALLOW)
    assert not again.result.changed, again.result.summary
    assert " 0 created, 0 changed" in again.result.summary and not failed(again)
    assert versions(kueue_target) == before
    assert time.monotonic() - started < 30


def test_dependencies_name_the_target_and_the_worker_credential(
    module_repo: Repository, seeded_backup: Manifest, kueue_target: KubeLab
) -> None:
    deps = restore_dependencies(module_repo, plugin, seeded_backup, settings(kueue_target))
    found = {(d.kind, d.address) for d in deps}
    assert ("endpoint", kueue_target.apiserver.url) in found
    assert ("credential", "Secret kueue-system/worker1-secret") in found


# --- diff: backup versus a live cluster -----------------------------------------------------------------


def test_diff_of_equal_clusters_shows_no_difference(
    cli: Cli, module_repo: Repository, seeded_backup: Manifest, kube_source: KubeLab, kueue_target: KubeLab
) -> None:
    proc = diff_cli(cli, module_repo, seeded_backup.id, kube_source)
    assert proc.returncode == 0, proc.stderr
    seeded = specs(kube_source)
    counts = f"{len(seeded['ClusterQueue'])} ClusterQueues, {len(seeded['Cohort'])} Cohorts"
    assert f"no differences ({counts}, {len(seeded['LocalQueue'])} LocalQueues" in proc.stdout
    data = json.loads(diff_cli(cli, module_repo, seeded_backup.id, kueue_target, "--json").stdout)
    assert data["equal"] and data["quotas"] == [] and data["links"] == []


def test_diff_shows_a_changed_nominal_quota(
    cli: Cli, module_repo: Repository, seeded_backup: Manifest, kueue_target: KubeLab, restored: RestoreOutcome
) -> None:
    set_gpu_quota(kueue_target, "cq-nlp", 12)
    proc = diff_cli(cli, module_repo, seeded_backup.id, kueue_target)
    assert proc.returncode == 9, (proc.stdout, proc.stderr)
    assert "1 quota difference(s), 0 queue wiring difference(s)" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "cq-nlp" in line)
    assert "h100" in row and "nvidia.com/gpu" in row and "16 → 12" in row and "changed" in row
    data = json.loads(diff_cli(cli, module_repo, seeded_backup.id, kueue_target, "--json").stdout)
    [change] = data["quotas"]
    assert (change["owner"], change["flavor"], change["fields"]) == ("cq-nlp", "h100", ["nominalQuota"])
    assert (change["backup"]["nominalQuota"], change["target"]["nominalQuota"]) == (16, 12)


def test_restore_repairs_drift_and_verify_saw_it(
    module_repo: Repository, seeded_backup: Manifest, kueue_target: KubeLab, kube_source: KubeLab
) -> None:
    """After the diff test: verify alone reports the changed quota; a restore puts the backup's back."""
    ctx = PluginRestoreContext(module_repo, seeded_backup, "kueue")
    quota = next(c for c in plugin.verify(ctx, settings(kueue_target), {"settle": 0}) if c.name == "kueue: quotas")
    assert not quota.ok and "ClusterQueue cq-nlp h100/nvidia.com/gpu: changed (nominalQuota 16 → 12)" in quota.detail
    outcome = run_restore(module_repo, seeded_backup, plugin, settings(kueue_target), options=SEED_ALLOW)
    assert outcome.result.changed and outcome.result.details["changed_objects"] == [
        "clusterqueues.kueue.x-k8s.io cq-nlp"
    ]
    assert not failed(outcome) and specs(kueue_target) == specs(kube_source)


def write_active(kube: KubeLab, plural: str, name: str, status: str | None, reason: str = "Ready") -> None:
    """What Kueue (or a check's controller) writes through /status: the Active condition, or none."""
    when = "2026-12-06T00:00:00Z"
    condition = {"type": "Active", "status": status, "reason": reason, "message": reason, "lastTransitionTime": when}
    body = {"status": {"conditions": [condition] if status else []}}
    path = f"/apis/{API}/{plural}/{name}/status"
    with kube.apiserver.access().session() as s:
        resp = s.patch(kube.apiserver.url + path, json=body, headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text[:300]


def test_verify_waits_for_kueues_verdict_on_every_restored_queue_and_names_its_checks(
    module_repo: Repository, seeded_backup: Manifest, kueue_target: KubeLab, restored: RestoreOutcome
) -> None:
    """Playing Kueue through /status: every restored ClusterQueue Active (its checks Active) but one, whose
    verdict comes late: Inactive, its check never reported Active. Before, the verify judged at once and took
    the missing verdict for "no Kueue controller" (a pass); now it waits for it, and fails naming the check."""
    from drtool_plugins.kueue.bundle import load
    from drtool_plugins.kueue.cluster import connect, served
    from drtool_plugins.kueue.refs import cq_checks
    from drtool_plugins.kueue.verify import settled_queues

    queues = {q["metadata"]["name"]: q for q in resource(kueue_target, "ClusterQueue").get().to_dict()["items"]}
    late = next(name for name, q in sorted(queues.items()) if list(cq_checks(q, "")))
    held = {n for _, n, _ in cq_checks(queues[late], "")}
    checks = [c["metadata"]["name"] for c in resource(kueue_target, "AdmissionCheck").get().to_dict()["items"]]
    try:
        for name in checks:
            write_active(kueue_target, "admissionchecks", name, None if name in held else "True")
        for name, q in queues.items():
            if name != late:
                ok = not {n for _, n, _ in cq_checks(q, "")} & held
                write_active(kueue_target, "clusterqueues", name, "True" if ok else "False", "AdmissionCheckInactive")
        reason = "AdmissionCheckInactive"
        later = threading.Timer(1.5, write_active, (kueue_target, "clusterqueues", late, "False", reason))
        later.start()
        client = connect(settings(kueue_target))
        ctx = PluginRestoreContext(module_repo, seeded_backup, "kueue")
        started = time.monotonic()
        check = settled_queues(load(ctx), client, served(client), {}, started + 5)
        later.join()
        assert not check.ok and time.monotonic() - started >= 1.5, check.detail
        assert f"{late}: {reason}" in check.detail
        assert f"AdmissionCheck {min(held)}: not Active (its controller has not reported it Active)" in check.detail
    finally:
        for plural, names in (("clusterqueues", queues), ("admissionchecks", checks)):
            for name in names:
                write_active(kueue_target, plural, name, None)  # later tests: a cluster without Kueue again


WORKER = "https://worker1.ml.example.com:6443"


def add_worker_secret(kube: KubeLab) -> None:
    """What the upstream MultiKueue sample asks the reader to create: the worker's kubeconfig Secret."""
    core = k8s.CoreV1Api(kube.api_client())
    core.create_namespace({"metadata": {"name": "kueue-system"}})
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "worker1", "cluster": {"server": WORKER}}],
        "users": [{"name": "kueue", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "worker1", "context": {"cluster": "worker1", "user": "kueue"}}],
        "current-context": "worker1",
    }
    body = {"metadata": {"name": "worker1-secret"}, "stringData": {"kubeconfig": json.dumps(kubeconfig)}}
    core.create_namespaced_secret("kueue-system", body)


def test_multikueue_secret_travels_with_its_cluster(
    module_repo: Repository, kueue_target: KubeLab, restored: RestoreOutcome, lab_root: Path
) -> None:
    """With the kubeconfig Secret in Kueue's namespace, the backup carries it (sensitive) and a restore
    into an empty cluster needs no allow_missing; the worker's API server is a named dependency."""
    add_worker_secret(kueue_target)
    with_secret = backup(module_repo, kueue_target)
    meta = with_secret.plugins["kueue"].meta
    assert meta["dangling_in_source"] == [] and meta["objects"]["secrets"] == 1
    secrets = next(a for a in with_secret.artifacts_of("kueue") if a.name == "resources/core/secrets.ndjson")
    assert secrets.sensitive
    kube = start_kube_lab(lab_root, "kueue-mk")
    try:
        outcome = run_restore(module_repo, with_secret, plugin, settings(kube))
        assert outcome.result.changed and not failed(outcome), failed(outcome)
        assert outcome.result.details["missing_references"] == []
        copied = k8s.CoreV1Api(kube.api_client()).read_namespaced_secret("worker1-secret", "kueue-system")
        assert WORKER in base64.b64decode(copied.data["kubeconfig"]).decode()
        deps = restore_dependencies(module_repo, plugin, with_secret, settings(kube))
        assert ("reference", WORKER) in {(d.kind, d.address) for d in deps}
    finally:
        kube.lab.down()


# --- a ClusterQueue whose flavor is gone ------------------------------------------------------------------


def test_missing_flavor_is_reported_before_anything_is_written(
    module_repo: Repository, kueue_target: KubeLab, restored: RestoreOutcome
) -> None:
    """Back up a cluster where cq-speech names the deleted flavor l4, drift cq-speech's quota, restore:
    refused with the reference named, and the target untouched (the drift is still there)."""
    resource(kueue_target, "ResourceFlavor").delete(name="l4")
    broken = backup(module_repo, kueue_target)
    set_gpu_quota(kueue_target, "cq-speech", 1)
    before = versions(kueue_target)
    with pytest.raises(UsageError) as err:
        run_restore(module_repo, broken, plugin, settings(kueue_target), options=SEED_ALLOW)
    message = err.value.message
    assert "ClusterQueue cq-speech spec.resourceGroups[1].flavors[0].name -> ResourceFlavor l4" in message
    assert "nothing was written" in message and "allow_missing=flavor" in (err.value.hint or "")
    assert "FlavorNotFound" in (err.value.hint or "")
    assert versions(kueue_target) == before
    dry = run_restore(module_repo, broken, plugin, settings(kueue_target), options={**SEED_ALLOW, "dry_run": True})
    assert (dry.checks, dry.verification, dry.verified, dry.failed) == ([], "none", False, False)  # nothing to check
    assert "would FAIL: 1 missing reference(s)" in dry.result.summary
    assert dry.result.details["would_change"] == ["clusterqueues.kueue.x-k8s.io cq-speech"]
    assert versions(kueue_target) == before
    allowed = run_restore(
        module_repo, broken, plugin, settings(kueue_target), options={"allow_missing": "flavor,kubeconfig-secret"}
    )
    assert allowed.result.changed and not failed(allowed)
    refs = next(c for c in allowed.checks if c.name == "kueue: references")
    assert "missing reference(s) accepted by allow_missing" in refs.detail
