"""Catalog access: SQLite by default, any SQLAlchemy URL (PostgreSQL) works too."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, create_engine, delete, select

from drtool.catalog import rows
from drtool.catalog import runs as _runs  # its tables are created (and upgraded) with the others
from drtool.catalog import scenarios as _scenarios  # noqa: F401 - its table is created with the others
from drtool.catalog.models import ArtifactRow, BackupRow, ChainRow, StoreRow
from drtool.errors import DrtoolError, Unauthentic, UsageError
from drtool.files import touch_private
from drtool.repo import layout
from drtool.repo.manifest import Manifest, utc_now
from drtool.repo.repository import Repository


@dataclasses.dataclass
class SyncResult:
    added: int = 0
    removed: int = 0
    unreadable: dict[str, str] = dataclasses.field(default_factory=dict)


class Catalog:
    def __init__(self, url: str) -> None:
        if "://" not in url:
            touch_private(Path(url).expanduser())  # it lists every backup and restore: 0600, in a 0700 folder
            url = f"sqlite:///{Path(url).expanduser()}"
        self.url = url
        self.engine = create_engine(url, pool_pre_ping=True)
        for attempt in range(3):
            try:
                SQLModel.metadata.create_all(self.engine)
                _runs.upgrade(self.engine)
                break
            except OperationalError as exc:
                raced = any(s in str(exc.orig) for s in ("already exists", "duplicate column"))
                if raced and attempt < 2:
                    continue  # another process (a plan's step, a second drtool) created it after we looked
                raise UsageError(
                    f"cannot open catalog {self._safe_url()}: {exc.orig}",
                    "check DRTOOL_CATALOG; the catalog is a cache and can be rebuilt",
                ) from None

    def close(self) -> None:
        """Release pooled connections (a server may go away before the garbage collector runs)."""
        self.engine.dispose()

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def record(self, manifest: Manifest) -> None:
        with Session(self.engine) as session:
            self._insert(session, manifest)
            session.commit()

    @staticmethod
    def _insert(session: Session, m: Manifest) -> None:
        session.merge(BackupRow(**rows.backup_row(m)))
        chain = rows.chain_row(m)
        if chain is not None:
            session.merge(ChainRow(**chain))
        session.exec(delete(ArtifactRow).where(ArtifactRow.backup_id == m.id))
        for row in rows.artifact_rows(m):
            session.add(ArtifactRow(**row))

    def sync(self, repo: Repository, *, rebuild: bool = False) -> SyncResult:
        """Make the catalog match the store: add manifests it lacks, drop rows the store no longer has."""
        store_id = repo.config.store_id
        result = SyncResult()
        in_store = set(repo.backup_ids())
        with Session(self.engine) as session:
            if rebuild:
                self._forget(session, store_id, None)
            known = set(session.exec(select(BackupRow.id).where(BackupRow.store_id == store_id)).all())
            for backup_id in sorted(in_store - known):
                try:
                    self._insert(session, repo.get_manifest(backup_id))
                    result.added += 1
                except Unauthentic as exc:  # no backup: anyone can put such an object in the store
                    repo.skip(layout.manifest(backup_id), exc.message)
                except DrtoolError as exc:
                    result.unreadable[backup_id] = exc.message
            gone = known - in_store
            self._forget(session, store_id, gone)
            result.removed = len(gone)
            session.merge(StoreRow(store_id=store_id, url=repo.backend.url, last_sync=utc_now()))
            session.commit()
        return result

    @staticmethod
    def _forget(session: Session, store_id: str, ids: Iterable[str] | None) -> None:
        query = select(BackupRow.id).where(BackupRow.store_id == store_id)
        targets = list(ids) if ids is not None else list(session.exec(query).all())
        if targets:
            session.exec(delete(ChainRow).where(ChainRow.backup_id.in_(targets)))  # type: ignore[attr-defined]
            session.exec(delete(ArtifactRow).where(ArtifactRow.backup_id.in_(targets)))  # type: ignore[attr-defined]
            session.exec(delete(BackupRow).where(BackupRow.id.in_(targets)))  # type: ignore[attr-defined]

    def backups(self, store_id: str) -> list[BackupRow]:
        """In the order they were made: by start time (microseconds), not by id (ids of one second sort by
        their random suffix)."""
        with Session(self.engine) as session:
            query = select(BackupRow).where(BackupRow.store_id == store_id)
            query = query.order_by(BackupRow.started, BackupRow.id)  # type: ignore[arg-type]
            return list(session.exec(query).all())

    def chain_links(self, store_id: str) -> dict[str, ChainRow]:
        """Chain positions of the store's backups that have one, by backup id."""
        with Session(self.engine) as session:
            query = select(ChainRow).join(BackupRow).where(BackupRow.store_id == store_id)
            return {row.backup_id: row for row in session.exec(query).all()}

    def artifacts(self, backup_id: str) -> list[ArtifactRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(ArtifactRow).where(ArtifactRow.backup_id == backup_id)).all())
