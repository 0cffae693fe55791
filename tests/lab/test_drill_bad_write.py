"""Scenario drill ``bad-write`` end to end in a living lab: a mass delete undone by a point-in-time restore.

The lab's etcd (under its kube-apiserver, with the seeded AI platform in it) is followed into a store
(`drtool follow -p etcd`, in a thread). At T every ConfigMap of team-nlp is deleted in one request and the
cluster goes on writing (a new ConfigMap after T). The shipped plan restore-plans/bad-write-pitr.yaml
replays the chain into a new etcd member up to a point just before T; the drill judges on that member that
every deleted ConfigMap is there and the one written after T is not, and records the RPO from the point
restored and the time to service.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from drtool_lab.cluster import cluster_target
from drtool_lab.lab import Lab
from drtool_lab.plugins.etcd import EtcdLab

from drtool.backends.local import LocalBackend
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.bad_write import BadWrite
from drtool.drills.run import run_drill
from drtool.follow import FollowSession, run_follow
from drtool.plans.source import find_backup
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.rehearsal.target import stop_restored_servers
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli

PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "bad-write-pitr.yaml"


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
        loaded = check_file(PLAN, load_plugins(), {"AT": stamp})
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
                   "--plan", str(PLAN), "--values", str(values), "--kubeconfig",
                   cluster_target(drill_lab)["kubeconfig"], "--json", timeout=900, check=True)  # fmt: skip

    row = json.loads(proc.stdout)
    assert row["ok"] and row["plan_name"] == "bad-write-pitr", row
    assert {c["name"]: c["ok"] for c in row["checks"]} == {"as of T": True, "nothing after T": True}, row
    assert 0 < row["rpo_s"] < 30 and 0 < row["time_to_service_s"] < 900, row
    assert (data_dir.parent / "data.drtool-restore.json").exists()  # the plan's own member, from --values
