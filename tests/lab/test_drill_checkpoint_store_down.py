"""Scenario ``checkpoint-store-down`` in a living lab: the lab's MinIO stopped while the trainer saves a checkpoint.

The trainer trains run ``mlp`` in the lab's MinIO, a checkpoint every 10 steps, and waits half-way through
the save of step 30 (two shards of three written, no index). The scheduled backup runs then: it holds steps
10 and 20 and skips the torn 30. The drill stops the MinIO under the save, and restore-plans/training-resume.yaml
restores the latest backup into a standby MinIO (another lab's) and the same living cluster; its
``training-resumes`` check runs the trainer as a Job there, which must resume from step 20 bit for bit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.components.minio import MinioServer
from drtool_lab.lab import Lab
from drtool_lab.training import paused_in_save

from drtool.audit.resume import resume_drilled
from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.checkpoint_store_down import CheckpointStoreDown
from drtool.drills.run import run_drill
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.probe import reachable
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE

PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "training-resume.yaml"


def _minio(lab: Lab, bucket: str) -> tuple[MinioServer, dict[str, Any]]:
    lab.up(["minio"])
    minio = lab.first("minio")
    assert isinstance(minio, MinioServer)
    minio.create_bucket(bucket)
    location = {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}
    return minio, {"url": f"s3://{bucket}/runs", **location}


@pytest.fixture(scope="module")
def labs(lab_root: Path) -> Iterator[tuple[Lab, Lab]]:
    lab, standby = Lab("drill-ckpt", root=lab_root), Lab("drill-ckpt-standby", root=lab_root)
    try:
        yield lab, standby
    finally:
        standby.down()
        lab.down()


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_the_checkpoint_store_stopped_mid_save_is_recovered_from_the_last_complete_checkpoint(
    labs: tuple[Lab, Lab], tmp_path: Path
) -> None:
    lab, standby = labs
    cluster = seeded_cluster(lab)
    store, location = _minio(lab, "training")
    _, standby_location = _minio(standby, "restored-checkpoints")
    plugins = [get_plugin("checkpoints"), get_plugin("kubernetes"), get_plugin("kueue")]
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    target = cluster_target(lab)
    values = {"TARGET_KUBECONFIG": target["kubeconfig"], "TRAINING_RUN_FOLDER": "mlp", "CHECK_TIMEOUT": "10m"}
    loaded = check_file(PLAN, load_plugins(), values)
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
