"""The scheduler on real stores: several runs with pruning, SIGTERM mid-backup, config validation, CLI."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from drtool.backends import open_backend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.crypto.credentials import Credentials
from drtool.errors import UsageError
from drtool.plugin.manager import get_plugin
from drtool.repo import layout
from drtool.repo.check import check
from drtool.repo.repository import Repository
from drtool.scheduler.history import RunHistory
from drtool.scheduler.runner import SetRunner
from drtool.scheduler.service import SchedulerService, next_runs
from drtool.scheduler.sets import parse_backup_sets
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.noise import noise


def write_config(home: Path, store: str, data: Path, **set_overrides: object) -> Path:
    body = {"plugins": ["files"], "interval": "1s", "rpo": "1h", "retention": {"keep_last": 2}} | set_overrides
    config = {"store": store, "sources": {"files": {"paths": [str(data)]}}, "backup_sets": {"quick": body}}
    path = home / ".config" / "drtool" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store") if request.param == "local" else request.getfixturevalue("s3_store_url")


def test_several_scheduled_runs_with_pruning(store_url: str, tmp_path: Path) -> None:
    """Interval 1 s, four runs, keep_last 2: each run prunes; what stays is restorable and nothing leaks."""
    repo = Repository.init(open_backend(store_url), passphrase=PASSPHRASE)
    data = tmp_path / "data"
    data.mkdir()
    sets = parse_backup_sets(
        {"quick": {"plugins": ["files"], "interval": "1s", "retention": {"keep_last": 2}, "tags": ["sched"]}}, "test"
    )
    catalog = Catalog(str(tmp_path / "catalog.db"))
    runner = SetRunner(repo, sets, {"files": {"paths": [str(data)]}}, catalog=catalog)
    made = []

    def fresh_data() -> None:  # each run backs up new content, so prune has chunks to collect
        (data / "f.bin").write_bytes(noise(150_000, len(made)))

    fresh_data()
    original_run = runner.run

    def run_and_change(name: str):
        result = original_run(name)
        made.append(result.backup_id)
        fresh_data()
        return result

    runner.run = run_and_change  # type: ignore[method-assign]
    started = time.monotonic()
    results = SchedulerService(runner, catalog.engine).run(max_runs=4)
    elapsed = time.monotonic() - started
    assert [r.status for r in results] == ["ok"] * 4, [r.error for r in results]
    assert 2.5 < elapsed < 60  # first run at once, then one per second
    assert [len(r.prune.forgotten) for r in results] == [0, 0, 1, 1]  # type: ignore[union-attr]
    assert sum(r.prune.chunks_deleted for r in results) >= 2  # type: ignore[union-attr]
    assert sorted(repo.backup_ids()) == sorted(made[-2:])
    report = check(repo, read_data=True)
    assert report.ok and report.orphan_chunks == [], report.to_json()
    assert list(repo.backend.list(layout.LOCKS)) == []
    assert repo.get_manifest(made[-1]).tags == ["sched"]
    history = RunHistory(catalog.engine).runs("quick")
    assert [(h.status, h.backup_id) for h in history] == [("ok", b) for b in made]
    assert {r.id for r in catalog.backups(repo.config.store_id)} == set(made[-2:])  # catalog follows the prune
    assert "quick" in next_runs(catalog.engine)  # the job persists in the catalog database


def test_failed_run_is_recorded_not_raised_and_store_untouched(tmp_path: Path) -> None:
    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    sets = parse_backup_sets({"broken": {"plugins": ["files"], "interval": "1h"}}, "test")
    catalog = Catalog(str(tmp_path / "catalog.db"))
    runner = SetRunner(repo, sets, {"files": {"paths": [str(tmp_path / "missing")]}}, catalog=catalog)
    result = runner.run("broken")
    assert (result.status, result.reason, result.exit_code) == ("failed", "SourceError", 7)
    assert "not found" in result.error and result.prune is None
    assert repo.backup_ids() == []
    [row] = RunHistory(catalog.engine).runs("broken")
    assert row.status == "failed" and row.reason == "SourceError"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"plugins": ["files"]}, "exactly one of `cron` or `interval`"),
        ({"plugins": ["files"], "cron": "0 3 * *", "interval": "1h"}, "cron"),
        ({"plugins": ["files"], "cron": "61 * * * *"}, "cron"),
        ({"plugins": [], "interval": "1h"}, "plugins"),
        ({"plugins": ["files"], "interval": "1h", "retention": {"keep_dayly": 3}}, "retention.keep_dayly"),
        ({"plugins": ["files"], "interval": "soon"}, "interval"),
        ({"plugins": ["files"], "interval": "1h", "schedule": "x"}, "schedule"),
    ],
)
def test_backup_set_config_errors_name_the_field(body: dict, fragment: str) -> None:
    with pytest.raises(UsageError, match="backup set 'nightly'") as err:
        parse_backup_sets({"nightly": body}, "config.yaml")
    assert fragment in err.value.message


def test_cron_set_and_defaults() -> None:
    sets = parse_backup_sets({"nightly": {"plugins": ["etcd"], "cron": "30 2 * * *", "jitter": "5m"}}, "c")
    nightly = sets["nightly"]
    assert nightly.schedule_text() == "cron 30 2 * * *" and nightly.jitter.total_seconds() == 300
    assert nightly.sources_for({"etcd": {"endpoints": "x"}}) == {"etcd": {"endpoints": "x"}}
    assert nightly.retention.is_empty()


def _wait_for(check_fn, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check_fn():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigterm_in_the_middle_of_a_backup(cli: Cli, tmp_path: Path) -> None:
    """`drtool schedule run` gets SIGTERM while a large backup streams: exit 0 quickly, nothing published."""
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "big.img", "wb") as f:  # sparse: 6 GiB to read, nothing on disk; takes far longer than the test
        f.truncate(6 << 30)
    write_config(cli.home, str(store), data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "drtool", "schedule", "run", "--metrics-address", ""],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the running backup holds its shared lock; zeros dedupe into one chunk, so a pack is far off: give it a second
        _wait_for(lambda: (store / "locks").is_dir() and any((store / "locks").iterdir()), 60, "the backup's lock")
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert stopped_in < 15
    assert "interrupted" in err and "Traceback" not in err
    assert not (store / "manifests").exists() or not any((store / "manifests").iterdir())  # no visible backup
    assert not any((store / "locks").iterdir())  # the lock was released
    result = json.loads(cli("check", "--read-data", "--json", check=True).stdout)
    assert result["ok"] and result["backups"] == 0
    listing = json.loads(cli("schedule", "list", "--json", check=True).stdout)
    assert listing[0]["last_result"] == "interrupted" and listing[0]["newest_backup"] is None


def test_run_once_and_list_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    data = tmp_path / "data"
    data.mkdir()
    (data / "f").write_bytes(noise(10_000))
    write_config(cli.home, str(store), data, rpo="1h")
    prom = tmp_path / "drtool.prom"
    first = cli("schedule", "run-once", "quick", "--metrics-textfile", str(prom), "--json", check=True)
    result = json.loads(first.stdout)
    assert result["status"] == "ok" and result["backup_id"]
    assert 'drtool_backup_runs_total{result="ok",set="quick"} 1.0' in prom.read_text()
    [row] = json.loads(cli("schedule", "list", "--json", check=True).stdout)
    assert row["last_result"] == "ok" and row["newest_backup"] and row["rpo_met"] is True
    write_config(cli.home, str(store), data, rpo="1s")  # the same backups against a stricter objective
    time.sleep(1.1)
    [row] = json.loads(cli("schedule", "list", "--json", check=True).stdout)
    assert row["rpo_met"] is False and row["rpo_age_s"] > 1
    assert "BREACHED" in cli("schedule", "list", env={"COLUMNS": "250"}, check=True).stdout
    assert_clean_error(cli("schedule", "run-once", "nope"), 2, "no backup set 'nope'")
    (data / "f").unlink()
    data.rmdir()
    failed = cli("schedule", "run-once", "quick")
    assert failed.returncode == 7 and "backup of set quick failed" in failed.stderr, failed.stderr
    assert "Traceback" not in failed.stderr


def test_prune_and_unlock_cli(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    data = tmp_path / "data"
    data.mkdir()
    write_config(cli.home, str(store), data, retention={"keep_last": 1})
    repo = Repository.open(open_backend(str(store)), Credentials(passphrase=PASSPHRASE))
    ids = []
    for seed in range(3):
        (data / "f").write_bytes(noise(50_000, seed))
        ids.append(run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(data)]}}, backup_set="quick").id)
    dry = cli("prune", "--dry-run", check=True).stdout
    assert "would forget 2 backup(s)" in dry and "newest complete backup of the set" in dry
    assert len(json.loads(cli("list", "--json", check=True).stdout)) == 3
    assert_clean_error(cli("prune", "--set", "other"), 2, "no backup set 'other'")
    report = json.loads(cli("prune", "--json", check=True).stdout)
    assert sorted(report["forgotten"]) == sorted(ids[:2]) and report["chunks_deleted"] == 2
    assert [b["id"] for b in json.loads(cli("list", "--json", check=True).stdout)] == [ids[2]]
    # a lock left by a killed process is stale; `unlock` removes it, prune would have too
    script = (
        "import os\nfrom drtool.crypto.credentials import Credentials\nfrom drtool.repo.repository import Repository\n"
        "from drtool.repo.lock import acquire\nfrom drtool.backends import open_backend\n"
        f"acquire(Repository.open(open_backend({str(store)!r}), Credentials(passphrase={PASSPHRASE!r})), "
        "'exclusive', 'killed prune')\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert "removed exclusive lock" in cli("unlock", check=True).stdout
    assert cli("unlock", check=True).stdout.strip() == "no locks"


def _due(engine, name: str, when: dt.datetime) -> None:
    """Set a stored job's next run, as if the scheduler had been down since then (job store only: a running
    scheduler would process the job while we change it)."""
    from apscheduler.schedulers.background import BackgroundScheduler

    from drtool.scheduler.service import job_store

    store = job_store(engine)
    store.start(BackgroundScheduler(timezone=dt.UTC), "default")
    job = store.lookup_job(name)
    job.next_run_time = when
    store.update_job(job)


def test_restart_runs_a_missed_run_within_misfire_grace_only(tmp_path: Path) -> None:
    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    sets = parse_backup_sets({"s": {"plugins": ["files"], "interval": "1h", "misfire_grace": "10m"}}, "test")
    catalog = Catalog(str(tmp_path / "catalog.db"))

    def service() -> SchedulerService:
        return SchedulerService(
            SetRunner(repo, sets, {"files": {"paths": [str(tmp_path / "d")]}}, catalog=catalog), catalog.engine
        )

    assert [r.status for r in service().run(max_runs=1)] == ["ok"]  # a new set runs at once
    next_run = next_runs(catalog.engine)["s"]
    assert next_run is not None and next_run > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=55)

    _due(catalog.engine, "s", dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5))  # missed 5 min ago
    assert [r.status for r in service().run(max_runs=1)] == ["ok"]  # within grace: runs once on restart

    _due(catalog.engine, "s", dt.datetime.now(dt.UTC) - dt.timedelta(minutes=150))  # missed by 30 min and more
    late = service()
    threading.Timer(3.0, lambda: setattr(late.runner.stopper, "stopping", True)).start()
    assert late.run() == []  # beyond misfire_grace: skipped, waits for the next regular time
    assert len(repo.backup_ids()) == 2
