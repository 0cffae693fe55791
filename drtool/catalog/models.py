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


class StoreRow(SQLModel, table=True):
    __tablename__ = "stores"
    store_id: str = Field(primary_key=True)
    url: str
    last_sync: str
