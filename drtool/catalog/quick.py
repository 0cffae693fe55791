"""Recording a finished backup in an existing SQLite catalog with the standard library's ``sqlite3``.

A backup records one row per backup and artifact. Through ``Catalog`` that costs importing SQLAlchemy and
SQLModel, about 0.45 CPU-seconds: a third of an unchanged re-backup's whole process, which reads no data
(docs/performance.md, "Unchanged files"). When the catalog is a SQLite file that already holds the backup
tables with every column written here, the rows (``drtool.catalog.rows``, the same dicts ``Catalog`` writes)
go in with ``sqlite3``, in one transaction, with the same upsert semantics. Anything else (a new catalog, a
PostgreSQL URL, a schema this drtool does not know, an error while writing) takes ``Catalog``, which creates
and upgrades tables and reports problems as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from drtool.catalog import rows
from drtool.files import touch_private
from drtool.repo.manifest import Manifest

TABLES = ("backups", "artifacts", "chain_links")
BUSY_TIMEOUT = 5.0  # seconds another writer may hold the database: pysqlite's default, as through SQLAlchemy


class Recorder(Protocol):
    """What a backup needs of a catalog."""

    def record(self, manifest: Manifest) -> None: ...


class SqliteRecorder:
    """Writes a manifest's rows into a SQLite catalog whose tables exist (``open`` checked them)."""

    def __init__(self, path: Path, columns: Mapping[str, frozenset[str]]) -> None:
        self.path, self.columns = path, columns

    @classmethod
    def open(cls, url: str) -> SqliteRecorder | None:
        """A recorder for ``url`` if it names an existing SQLite catalog with the backup tables, else None."""
        if "://" in url:
            return None
        path = Path(url).expanduser()
        if not path.is_file():
            return None
        touch_private(path)  # as Catalog does: its folder 0700
        try:
            with _connect(path) as con:
                columns = {t: frozenset(r[1] for r in con.execute(f"PRAGMA table_info({t})")) for t in TABLES}
        except sqlite3.Error:
            return None
        return cls(path, columns) if all(columns.values()) else None

    def record(self, manifest: Manifest) -> None:
        try:
            self._write(manifest)
        except (sqlite3.Error, _UnknownColumns):
            from drtool.catalog.db import Catalog  # it creates what is missing and reports what is wrong

            catalog = Catalog(str(self.path))
            try:
                catalog.record(manifest)
            finally:
                catalog.close()

    def _write(self, m: Manifest) -> None:
        con = _connect(self.path)
        try:
            con.execute("BEGIN IMMEDIATE")
            self._insert(con, "INSERT OR REPLACE", "backups", rows.backup_row(m))
            chain = rows.chain_row(m)
            if chain is not None:
                self._insert(con, "INSERT OR REPLACE", "chain_links", chain)
            con.execute("DELETE FROM artifacts WHERE backup_id = ?", (m.id,))
            for row in rows.artifact_rows(m):
                self._insert(con, "INSERT", "artifacts", row)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    def _insert(self, con: sqlite3.Connection, verb: str, table: str, row: Mapping[str, Any]) -> None:
        if not self.columns[table] >= row.keys():
            raise _UnknownColumns(table)
        names = ", ".join(row)
        con.execute(f"{verb} INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


class _UnknownColumns(Exception):
    """The catalog's table lacks a column this drtool writes: ``Catalog`` upgrades it."""


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)  # transactions are explicit


def backup_recorder(url: str) -> Recorder:
    """Where a backup records itself: ``SqliteRecorder`` when it can, else ``Catalog`` (opened now, so a
    catalog that cannot be opened is reported before the backup runs, as before)."""
    quick = SqliteRecorder.open(url)
    if quick is not None:
        return quick
    from drtool.catalog.db import Catalog

    return Catalog(url)
