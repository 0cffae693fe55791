"""Scenario drills ``checkpoint-store-down`` and ``bad-write`` in one living lab (one lab start and seed for both): the
checkpoint drill first (it stops the lab's MinIO, which the bad-write drill does not use), then the bad write's two
drills (each deletes one team's ConfigMaps in the lab and restores them into a new etcd member, not into the lab).

``checkpoint-store-down``: the lab's MinIO stopped while the trainer saves a checkpoint.

The trainer trains run ``mlp`` in the lab's MinIO, a checkpoint every 10 steps, and waits half-way through the save
of step 30 (two shards of three written, no index). The scheduled backup runs then: it holds steps 10 and 20 and
skips the torn 30. The drill stops the MinIO under the save, and restore-plans/training-resume.yaml restores the
latest backup into a standby MinIO (another lab's) and the same living cluster; its ``training-resumes`` check runs
the trainer as a Job there, which must resume from step 20 bit for bit.

``bad-write``: a mass delete undone by a point-in-time restore.

The lab's etcd (under its kube-apiserver, with the seeded AI platform in it) is followed into a store (`drtool
follow -p etcd`, in a thread). At T every ConfigMap of team-nlp is deleted in one request and the cluster goes on
writing (a new ConfigMap after T). The shipped plan restore-plans/bad-write-pitr.yaml replays the chain into a new
etcd member up to a point just before T; the drill judges on that member that every deleted ConfigMap is there and
the one written after T is not, and records the RPO from the point restored and the time to service.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.components.minio import MinioServer
from drtool_lab.lab import Lab
from drtool_lab.plugins.etcd import EtcdLab
from drtool_lab.training import paused_in_save

from drtool.audit.resume import resume_drilled
from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.bad_write import BadWrite
from drtool.drills.checkpoint_store_down import CheckpointStoreDown
from drtool.drills.run import run_drill
from drtool.follow import FollowSession, run_follow
from drtool.plans.source import find_backup
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.probe import reachable
from drtool.rehearsal.target import stop_restored_servers
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli

RESUME_PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "training-resume.yaml"
PITR_PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "bad-write-pitr.yaml"


def _minio(lab: Lab, bucket: str) -> tuple[MinioServer, dict[str, Any]]:
    lab.up(["minio"])
    minio = lab.first("minio")
    assert isinstance(minio, MinioServer)
    minio.create_bucket(bucket)
    location = {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}
    return minio, {"url": f"s3://{bucket}/runs", **location}


@pytest.fixture(scope="module")
def standby(lab_root: Path) -> Iterator[Lab]:
    """The lab whose MinIO the checkpoints are restored into (the drill lab's stops under the save)."""
    standby = Lab("drill-ckpt-standby", root=lab_root)
    try:
        yield standby
    finally:
        standby.down()


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_the_checkpoint_store_stopped_mid_save_is_recovered_from_the_last_complete_checkpoint(
    drill_lab: Lab, standby: Lab, tmp_path: Path
) -> None:
    lab = drill_lab
    cluster = seeded_cluster(lab)
    store, location = _minio(lab, "training")
    _, standby_location = _minio(standby, "restored-checkpoints")
    plugins = [get_plugin("checkpoints"), get_plugin("kubernetes"), get_plugin("kueue")]
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    target = cluster_target(lab)
    values = {"TARGET_KUBECONFIG": target["kubeconfig"], "TRAINING_RUN_FOLDER": "mlp", "CHECK_TIMEOUT": "10m"}
    loaded = check_file(RESUME_PLAN, load_plugins(), values)
    catalog = Catalog(str(tmp_path / "catalog.db"))
    injector = CheckpointStoreDown(store.api_url, store.stop)

    with paused_in_save(lab, location, "mlp") as saved_at:  # step 30's save half written
        sources = {"checkpoints": {"sources": [{"name": "training", **location}]}, "kubernetes": cluster}
        manifest = run_backup(repo, plugins, sources | {"kueue": cluster})  # the schedule's backup, mid-save
        assert manifest.status == "complete"
        row = run_drill(
            injector, target, loaded, repo, manifest, catalog, step_targets={"checkpoints": standby_location}
        )

    print(f"figures: RPO {row.rpo_s}s, {row.rpo_steps} steps; time to service {row.time_to_service_s}s")  # docs
    assert row.ok, (row.error, row.checks)
    assert not reachable(store.api_url)  # the drill never needed the store that stopped
    checks = {c["name"]: c for c in row.to_dict()["checks"]}
    resumed = next(c for name, c in checks.items() if "training-resumes" in name)
    assert "resumed from step 20, the last complete checkpoint; step 30 torn and not used" in resumed["detail"]
    assert "bit for bit" in resumed["detail"]
    assert all(c["ok"] for c in checks.values()), checks
    # what was lost: the steps after 20, and the training time since step 20's checkpoint was written
    assert sorted(saved_at) == [10, 20]
    assert row.rpo_steps == 10
    injected = _epoch(row.injected_at)
    # the store stamped step 20's marker before the trainer, its put returned, said when: seconds apart under load
    assert injected - saved_at[20] - 2 <= row.rpo_s <= injected - saved_at[20] + 10, (row.rpo_s, saved_at)
    assert row.rpo_s > injected - _epoch(manifest.finished)  # the training point is older than the backup
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 900
    # the standby holds steps 10 and 20 only: the torn checkpoint was never restored
    restored = standby.first("minio")
    assert isinstance(restored, MinioServer)
    keys = [o["Key"] for o in restored.client().list_objects_v2(Bucket="restored-checkpoints")["Contents"]]
    steps = {k.split("/step-")[1][:6] for k in keys if "/mlp/step-" in k}
    assert steps == {"000010", "000020"}, keys
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    last = rows["checkpoint-store-down"]["last"]
    assert last["ok"] and last["rpo_s"] == row.rpo_s and rows["checkpoint-store-down"]["runnable"]
    # the audit's resume-drilled item reads this very record: an incomplete checkpoint drilled
    grade = resume_drilled([], [], ScenarioLog(catalog).all())
    assert grade.evidence[0].startswith("incomplete checkpoint: checkpoint-store-down drill "), grade.evidence
    assert grade.evidence[0].endswith("resumed from step 20, step 30 torn and not used (10 steps lost)")


# --- bad-write ----------------------------------------------------------------------------------------------


def until(done: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f}s"
        time.sleep(0.2)


@contextlib.contextmanager
def following(lab: Lab, store: Path) -> Iterator[tuple[Repository, FollowSession]]:
    """The lab's etcd followed into a new store (`drtool follow -p etcd`, in a thread) once its first full is
    written; afterwards the follower stopped and every member a restore started under the lab stopped."""
    source = EtcdLab().seed(lab)
    repo = Repository.init(LocalBackend(store), passphrase=PASSPHRASE)
    session = FollowSession(repo, "etcd", "follow", {"period": 1.0, "idle": 5.0})
    follower = threading.Thread(target=run_follow, args=(repo, get_plugin("etcd"), source, session), daemon=True)
    follower.start()
    try:
        until(lambda: session.tip() is not None, "the follower's first full")
        yield repo, session
    finally:
        session.stop.set()
        follower.join(timeout=60)
        stop_restored_servers(lab.root)


def test_bad_write_is_undone_by_a_point_in_time_restore_to_just_before_it(drill_lab: Lab, tmp_path: Path) -> None:
    etcd_target = EtcdLab().target(drill_lab)
    with following(drill_lab, tmp_path / "store") as (repo, _):
        at = time.time()  # the point restored: just before the bad write
        stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        loaded = check_file(PITR_PLAN, load_plugins(), {"AT": stamp})
        manifest = find_backup(repo, loaded.require().source)
        catalog = Catalog(str(tmp_path / "catalog.db"))
        injector = BadWrite("team-nlp", repo, etcd_target["data_dir"])

        row = run_drill(injector, cluster_target(drill_lab), loaded, repo, manifest, catalog,
                        step_targets={"etcd": etcd_target}, recovery_point=at)  # fmt: skip

    assert row.ok, (row.error, row.checks)
    assert "model-server-config" in injector.deleted and len(injector.deleted) >= 2, injector.deleted
    checks = {c["name"]: c for c in row.to_dict()["checks"]}
    assert checks["as of T"]["ok"] and checks["as of T"]["detail"].startswith(f"{len(injector.deleted)}/"), checks
    assert checks["nothing after T"]["ok"] and "absent" in checks["nothing after T"]["detail"], checks
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    injected = dt.datetime.fromisoformat(row.injected_at.replace("Z", "+00:00")).timestamp()
    assert row.rpo_s is not None and row.rpo_s > 0  # from the point restored to the bad write, whatever the load
    assert abs(row.rpo_s - (injected - at)) < 0.01, (row.rpo_s, injected - at)
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 900
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["bad-write"]["last"]["ok"]


def test_bad_write_through_the_cli_prints_its_record(drill_lab: Lab, cli: Cli, tmp_path: Path) -> None:
    data_dir = drill_lab.root / "etcd-before-cli" / "data"
    values = tmp_path / "values.yaml"
    values.write_text(f"ETCD_DATA_DIR: '{data_dir}'\nETCD_MEMBER_NAME: etcd-before\nETCD_START: 'true'\n")
    with following(drill_lab, tmp_path / "store") as (repo, _):
        proc = cli("--store", repo.backend.url, "drill", "bad-write", "--namespace", "team-vision",
                   "--plan", str(PITR_PLAN), "--values", str(values), "--kubeconfig",
                   cluster_target(drill_lab)["kubeconfig"], "--json", timeout=900, check=True)  # fmt: skip

    row = json.loads(proc.stdout)
    assert row["ok"] and row["plan_name"] == "bad-write-pitr", row
    assert {c["name"]: c["ok"] for c in row["checks"]} == {"as of T": True, "nothing after T": True}, row
    assert 0 < row["rpo_s"] < 30 and 0 < row["time_to_service_s"] < 900, row
    assert (data_dir.parent / "data.drtool-restore.json").exists()  # the plan's own member, from --values
