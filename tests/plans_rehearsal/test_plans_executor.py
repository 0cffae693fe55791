"""Running plans against real servers: order and parallelism, dry runs, failures, resume, timeouts, sources."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.etcd_seed import settings_of

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.crypto.credentials import Credentials
from drtool.errors import NotFound
from drtool.plans.executor import Executor
from drtool.plans.loader import load_plan
from drtool.plans.schema import Source
from drtool.plans.source import resolve_backup
from drtool.plugin.manager import get_plugin
from drtool.rehearsal.target import stop_restored_servers
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.kube import KubeLab

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory, kube_source: KubeLab) -> Iterator[tuple[Repository, str]]:
    """The session's seeded control plane backed up (etcd, kubernetes, kueue) into a fresh local store."""
    path = tmp_path_factory.mktemp("plans-store") / "store"
    repo = Repository.init(LocalBackend(path), passphrase=PASSPHRASE)
    kube = {"kubeconfig": kube_source.readonly_kubeconfig}
    sources = {"etcd": settings_of(kube_source.etcd), "kubernetes": kube, "kueue": kube}
    manifest = run_backup(repo, [get_plugin(n) for n in sources], sources)
    assert manifest.status == "complete"
    yield repo, manifest.id


def etcd_step(step_id: str, root: Path, needs: str = "", extra: str = "") -> str:
    folder = root / step_id
    return (
        f"  - id: {step_id}\n    uses: etcd\n    needs: [{needs}]\n{extra}"
        f"    target: {{data_dir: '{folder}/data', name: {step_id}, start: true, lab_dir: '{folder}'}}\n"
    )


def plan_file(tmp_path: Path, body: str, parallelism: int = 4, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"name: test-{parallelism}\nparallelism: {parallelism}\nsteps:\n{body}")
    return path


@pytest.fixture
def restored(tmp_path: Path) -> Iterator[Path]:
    """A folder for restored etcd members; every member started under it is stopped afterwards."""
    yield tmp_path
    stop_restored_servers(tmp_path)


def overlap(a: Any, b: Any) -> bool:
    return a.started_s < b.finished_s and b.started_s < a.finished_s


@pytest.mark.parametrize("parallelism", [2, 1])
def test_steps_run_in_dependency_order_bounded_in_parallel_and_are_recorded(
    lab_store: tuple[Repository, str], restored: Path, parallelism: int
) -> None:
    repo, backup_id = lab_store
    body = etcd_step("one", restored) + etcd_step("two", restored) + etcd_step("three", restored, "one, two")
    catalog = Catalog(str(restored / "catalog.db"))
    run = Executor(
        load_plan(plan_file(restored, body, parallelism)), repo, repo.get_manifest(backup_id), catalog=catalog
    ).execute()
    assert run.ok, [(s.id, s.error) for s in run.steps.values()]
    one, two, three = (run.steps[i] for i in ("one", "two", "three"))
    assert three.started_s >= max(one.finished_s, two.finished_s)
    assert overlap(one, two) is (parallelism == 2)
    assert all(s.attempts == 1 and s.changed and any(c.name == "hashkv" for c in s.checks) for s in (one, two, three))
    rows = {r.step_id: r for r in RunLog(catalog).steps(run.run_id)}
    assert rows["three"].status == "ok" and rows["three"].finished_s > rows["three"].started_s
    assert "check ok: hashkv" in rows["one"].log
    assert RunLog(catalog).run(run.run_id).status == "ok"


def test_a_failed_step_stops_its_dependents_and_resume_completes(
    cli: Cli, lab_store: tuple[Repository, str], restored: Path
) -> None:
    repo, _ = lab_store
    (restored / "two" / "data").mkdir(parents=True)
    (restored / "two" / "data" / "someone-elses-file").write_text("not an etcd")
    body = etcd_step("one", restored) + etcd_step("two", restored) + etcd_step("three", restored, "two")
    plan = plan_file(restored, body)
    store = ["--store", repo.backend.url]
    proc = cli(*store, "restore", "--plan", str(plan))
    assert_clean_error(proc, 7, "step(s) two failed", "drtool restore --resume run-")
    run_id = proc.stderr.split("--resume ")[1].split("`")[0]
    assert "not run: needs two, which failed" in proc.stdout
    (restored / "two" / "data" / "someone-elses-file").unlink()
    resumed = cli(*store, "restore", "--resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    steps = {s["id"]: s for s in json.loads(resumed.stdout)["steps"]}
    assert steps["one"]["summary"] == f"done in run {run_id}" and steps["one"]["attempts"] == 0
    assert steps["two"]["status"] == steps["three"]["status"] == "ok"
    assert steps["two"]["attempts"] == 1


def test_a_left_out_plugin_skips_its_steps_even_required_ones_and_the_checks_that_read_them(
    lab_store: tuple[Repository, str], restored: Path
) -> None:
    """What a caller left out on purpose (the demo without a plugin's lab) is skipped with its reason; without
    ``left_out`` the same required step fails, its plugin being absent from the backup."""
    repo, backup_id = lab_store
    body = etcd_step("one", restored) + "  - id: objects\n    uses: kubernetes\n  - id: repos\n    uses: git\n"
    checks = "checks:\n  - {type: kube-object, id: ns, apiVersion: v1, kind: Namespace, name: team-nlp}\n"
    plan = plan_file(restored, body + checks)
    left_out = {"kubernetes": "kube-apiserver: no Go here", "git": "git: git is not installed"}
    run = Executor(load_plan(plan), repo, repo.get_manifest(backup_id), left_out=left_out).execute()
    assert run.ok and run.steps["one"].status == "ok"
    assert run.steps["objects"].status == run.steps["repos"].status == "skipped"
    assert run.steps["objects"].summary == "skipped: plugin left out: kube-apiserver: no Go here"
    assert run.checks == [] and "left out: kube-apiserver: no Go here" in run.checks_left_out["ns"]
    without = Executor(load_plan(plan_file(restored, etcd_step("two", restored) + "  - id: repos\n    uses: git\n")),
                       repo, repo.get_manifest(backup_id)).execute()  # fmt: skip
    assert without.steps["repos"].status == "failed" and "plugin not in backup" in without.steps["repos"].error


def test_timeouts_and_retries(lab_store: tuple[Repository, str], kube_target: KubeLab, tmp_path: Path) -> None:
    repo, backup_id = lab_store
    body = (
        "  - id: objects\n    uses: kubernetes\n    timeout: 1s\n    retries: 1\n"
        f"    target: {{kubeconfig: '{kube_target.kubeconfig}'}}\n"
    )
    run = Executor(load_plan(plan_file(tmp_path, body)), repo, repo.get_manifest(backup_id)).execute()
    step = run.steps["objects"]
    assert step.status == "failed" and step.error == "timed out after 1.0s" and step.attempts == 2
    assert 2.0 <= step.seconds < 10


def test_dry_run_of_every_shipped_plan(cli: Cli, lab_store: tuple[Repository, str]) -> None:
    repo, backup_id = lab_store
    for plan in sorted(PLANS.glob("*.yaml")):
        proc = cli("--store", repo.backend.url, "restore", "--plan", str(plan), "--dry-run")
        assert proc.returncode == 0, (plan, proc.stderr)
        assert backup_id in proc.stdout and "nothing was written" in proc.stdout
    full = cli("--store", repo.backend.url, "restore", "--plan", str(PLANS / "full-cluster-rebuild.yaml"), "--dry-run")
    assert "plugin not in backup" in full.stdout and "TARGET_KUBECONFIG" in full.stdout


def test_backup_selection_and_missing_backups(cli: Cli, lab_store: tuple[Repository, str], tmp_path: Path) -> None:
    repo, backup_id = lab_store
    reopened = Repository.open(LocalBackend(Path(repo.backend.url.removeprefix("file://"))), Credentials(PASSPHRASE))
    assert resolve_backup(reopened, Source()) == backup_id
    assert resolve_backup(reopened, Source.model_validate({"backup": backup_id[:12]})) == backup_id
    after = Source.model_validate({"backup": {"latest-before": "2099-01-01T00:00:00Z"}})
    assert resolve_backup(reopened, after) == backup_id
    with pytest.raises(NotFound, match="holds no backup before 2000-01-01"):
        resolve_backup(reopened, Source.model_validate({"backup": {"latest-before": "2000-01-01T00:00:00Z"}}))
    with pytest.raises(NotFound, match="holds no backup in set 'nightly'"):
        resolve_backup(reopened, Source.model_validate({"backup-set": "nightly"}))
    missing = tmp_path / "missing.yaml"
    missing.write_text("name: m\nsource: {backup: 20200101T000000Z-abcdef}\nsteps:\n  - {id: a, uses: etcd}\n")
    assert_clean_error(cli("--store", repo.backend.url, "restore", "--plan", str(missing)), 6, "not found")
    absent = tmp_path / "absent.yaml"
    absent.write_text("name: a\nsteps:\n  - {id: code, uses: git}\n")
    proc = cli("--store", repo.backend.url, "restore", "--plan", str(absent))
    assert_clean_error(proc, 7, "step(s) code failed")
    assert "plugin not in backup" in proc.stdout
    assert_clean_error(cli("--store", repo.backend.url, "restore", "--resume", "run-nope"), 6, "no restore run")
    assert_clean_error(cli("--store", repo.backend.url, "restore"), 2, "restore needs a backup and --plugin")


def test_the_restored_cluster_reads_back(lab_store: tuple[Repository, str], kube_target: KubeLab) -> None:
    """kueue-quotas-only executed for real: its checks and the objects read back with the official client.

    The target is a bare API server: the quotas are stored, but no Kueue runs to admit work, and the plan's
    platform check says so (docs/plans.md; tests/plans_rehearsal/test_living_restore.py has it pass on a living
    cluster)."""
    repo, backup_id = lab_store
    env = {"DRTOOL_VAR_TARGET_KUBECONFIG": kube_target.kubeconfig, "DRTOOL_VAR_CHECK_TIMEOUT": "3s"}
    loaded = load_plan(PLANS / "kueue-quotas-only.yaml", env=env)
    run = Executor(loaded, repo, repo.get_manifest(backup_id)).execute()
    assert all(s.status == "ok" for s in run.steps.values()), [(s.id, s.error) for s in run.steps.values()]
    checks = {c.name: c for c in run.checks}
    assert checks["gpu-flavor"].ok and checks["team-queue"].ok and len(checks) == 3, checks
    assert not checks["queue-admits"].ok and "Kueue made no Workload" in checks["queue-admits"].detail
    queues = kube_target.list_objects({"ClusterQueue": "kueue.x-k8s.io/v1beta2"})["ClusterQueue"]
    assert queues[("", "cq-nlp")]["spec"]["cohortName"]
