"""A backup records itself in an existing SQLite catalog without SQLAlchemy (drtool.catalog.quick), writing
exactly the rows ``Catalog`` writes; a new catalog, or one whose tables it does not know, goes through
``Catalog`` as before (issue 31: an unchanged re-backup spent a third of its CPU importing SQLAlchemy)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from drtool.catalog import Catalog
from drtool.catalog.quick import SqliteRecorder, backup_recorder
from drtool.repo.manifest import ArtifactEntry, ChainLink, Manifest, PluginOutcome
from tests.fixtures.core import PASSPHRASE, Cli

TABLES = ("backups", "artifacts", "chain_links")


def _manifest(backup_id: str, status: str = "complete", chain: bool = True) -> Manifest:
    outcome = {"status": "ok", "started": "s", "finished": "f"}
    return Manifest(
        id=backup_id,
        store_id="store-1",
        started="2026-12-06T01:00:00.000000Z",
        finished="2026-12-06T01:00:05.000000Z",
        status=status,  # type: ignore[arg-type]
        hostname="host",
        drtool_version="0",
        backup_set="nightly",
        tags=["a", "b"],
        plugins={"etcd": PluginOutcome(**outcome), "files": PluginOutcome(**outcome | {"status": "failed"})},
        artifacts=[
            ArtifactEntry(plugin="etcd", name="snap.db", size=10, sha256="ab", chunks=[("c1", 5), ("c2", 5)]),
            ArtifactEntry(plugin="files", name="files.tar", size=3, sha256="", chunks=[("c3", 3)], sensitive=True),
        ],
        stats={"bytes_stored": 7},
        kind="delta" if chain else "full",
        chain=ChainLink(plugin="etcd", base="b0", seq=2, first=5, last=9, last_time="t") if chain else None,
    )


def _rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as con:
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}


def _created(path: Path) -> Path:
    Catalog(str(path)).close()  # the tables, as any earlier drtool command leaves them
    return path


def test_the_sqlite3_rows_equal_the_catalogs(tmp_path: Path) -> None:
    through_catalog, quick = _created(tmp_path / "a.db"), _created(tmp_path / "b.db")
    recorder = backup_recorder(str(quick))
    assert isinstance(recorder, SqliteRecorder)
    catalog = Catalog(str(through_catalog))
    for m in (_manifest("b1"), _manifest("b2", chain=False), _manifest("b1", status="partial")):  # b1 again: upsert
        catalog.record(m)
        recorder.record(m)
    catalog.close()
    rows = _rows(quick)
    assert rows == _rows(through_catalog)
    assert len(rows["backups"]) == 2 and len(rows["artifacts"]) == 4 and len(rows["chain_links"]) == 1
    assert [b.status for b in Catalog(str(quick)).backups("store-1")] == ["partial", "complete"]


def test_a_new_or_unknown_catalog_goes_through_catalog(tmp_path: Path) -> None:
    assert isinstance(backup_recorder(str(tmp_path / "new.db")), Catalog)  # creates the tables
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as con:
        con.execute("CREATE TABLE backups (id TEXT PRIMARY KEY)")  # a catalog this drtool does not know
    assert isinstance(backup_recorder(str(old)), Catalog)
    lacking = _created(tmp_path / "lacking.db")
    recorder = backup_recorder(str(lacking))
    with sqlite3.connect(lacking) as con:  # a column gone after it was opened: Catalog records instead
        con.execute("ALTER TABLE artifacts DROP COLUMN sensitive")
    with pytest.raises(Exception, match="sensitive"):
        recorder.record(_manifest("b1"))  # Catalog's own error, as before this module existed


PROBE = """
import json, runpy, sys, threading
from drtool.crypto import slots
derived, derive = [], slots._derive
slots._derive = lambda *a: derived.append(threading.current_thread().name) or derive(*a)
sys.argv = ["drtool", *sys.argv[1:]]
try:
    runpy.run_module("drtool", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({"modules": sorted(sys.modules), "derived": derived}))
"""
# an unchanged local backup (the hourly one) needs none of these: the catalog's ORM, the lab, other plugins and
# their clients, the restore and prune paths (docs/performance.md, "Unchanged re-backup")
NOT_IN_A_BACKUP = ("sqlalchemy", "sqlmodel", "drtool_lab", "drtool_plugins.kubernetes", "boto3", "botocore")
NOT_IN_A_BACKUP += ("kubernetes", "requests", "urllib3", "hvac", "mlflow", "git", "drtool.restore", "drtool.prune")


def test_a_backup_into_an_existing_catalog_imports_no_sqlalchemy(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_text("x")
    config = cli.home / "drtool.yaml"
    config.write_text(json.dumps({"sources": {"files": {"paths": [str(tmp_path / "data")]}}}))
    env = cli.env | {"DRTOOL_CONFIG": str(config), "DRTOOL_PASSPHRASE": PASSPHRASE}
    store = str(tmp_path / "store")
    cli("init", "--store", store, "--no-save", env=env, check=True)

    def backup() -> dict[str, list[str]]:
        args = [sys.executable, "-c", PROBE, "--store", store, "backup", "-p", "files"]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    cli("--store", store, "backup", "-p", "files", env=env, check=True)  # creates the catalog
    second = backup()
    assert [m for m in NOT_IN_A_BACKUP if m in second["modules"]] == []
    assert second["derived"] == ["argon2id-ahead"]  # the key derived once, beside the imports (drtool/cli/entry.py)
    listed = json.loads(cli("--store", store, "list", "--json", env=env, check=True).stdout)
    assert len(listed) == 2
    with sqlite3.connect(env["DRTOOL_CATALOG"]) as con:
        assert con.execute("SELECT count(*) FROM backups").fetchone() == (2,)
