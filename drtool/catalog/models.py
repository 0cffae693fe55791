"""Catalog tables. Every column can be recomputed from the store's manifests."""

from __future__ import annotations

from sqlmodel import Field, SQLModel


class BackupRow(SQLModel, table=True):
    __tablename__ = "backups"
    id: str = Field(primary_key=True)
    store_id: str = Field(index=True)
    started: str
    finished: str = Field(index=True)
    status: str
    backup_set: str | None = None
    tags: str = ""  # comma separated
    plugins: str = ""  # comma separated plugin names
    failed_plugins: str = ""
    size: int = 0
    artifact_count: int = 0
    bytes_stored: int = 0
    hostname: str = ""


class ArtifactRow(SQLModel, table=True):
    __tablename__ = "artifacts"
    id: int | None = Field(default=None, primary_key=True)
    backup_id: str = Field(index=True, foreign_key="backups.id")
    plugin: str
    name: str
    size: int
    sha256: str
    chunk_count: int
    sensitive: bool = False


class ChainRow(SQLModel, table=True):
    """A backup's place in a delta chain (docs/store-format.md, "Delta chains"); only backups that have one.

    Its own table, so a catalog created before chains existed gains it without a migration."""

    __tablename__ = "chain_links"
    backup_id: str = Field(primary_key=True, foreign_key="backups.id")
    plugin: str
    kind: str  # full | delta
    base: str = Field(index=True)
    seq: int
    first: int | None = None
    last: int
    first_time: str | None = None
    last_time: str


class StoreRow(SQLModel, table=True):
    __tablename__ = "stores"
    store_id: str = Field(primary_key=True)
    url: str
    last_sync: str
