"""The backup manifest: the one object that makes a backup exist (written last, sealed, compressed)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Literal

import zstandard
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from drtool.errors import IntegrityError

MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 512 * 1024 * 1024


def new_backup_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class ArtifactInfo:
    """An artifact as recorded in a backup manifest, as a plugin sees it (``ArtifactEntry`` without its chunks)."""

    plugin: str
    name: str
    size: int
    sha256: str
    meta: Mapping[str, Any]
    sensitive: bool = False


class ArtifactEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")  # newer optional fields are skipped by older readers
    plugin: str
    name: str
    size: int
    sha256: str
    chunks: list[tuple[str, int]]  # (chunk id, plaintext length), in order
    meta: dict[str, Any] = Field(default_factory=dict)
    sensitive: bool = False


class PluginOutcome(BaseModel):
    model_config = ConfigDict(extra="ignore")  # newer optional fields are skipped by older readers
    status: Literal["ok", "failed"]
    error: str | None = None
    started: str
    finished: str
    meta: dict[str, Any] = Field(default_factory=dict)


class ChainLink(BaseModel):
    """Where a backup sits in a chain of continuous backups (docs/store-format.md, "Delta chains").

    Positions are the plugin's own log positions (etcd: revisions); the core only compares them.
    """

    model_config = ConfigDict(extra="ignore")
    plugin: str
    base: str  # backup id of the chain's first full backup (itself, for that backup)
    seq: int  # 0 for the first full; deltas count up from 1; a folded full carries the seq it folds through
    first: int | None = None  # first position a delta holds (None for a full)
    last: int  # last position held (a full: the position its snapshot is at, or a lower bound of it)
    first_time: str | None = None
    last_time: str  # when the source was at ``last`` (RFC 3339 UTC)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # newer optional fields are skipped by older readers
    version: int = MANIFEST_VERSION
    id: str
    store_id: str
    started: str
    finished: str
    status: Literal["complete", "partial"]
    hostname: str
    drtool_version: str
    backup_set: str | None = None
    tags: list[str] = Field(default_factory=list)
    plugins: dict[str, PluginOutcome] = Field(default_factory=dict)
    artifacts: list[ArtifactEntry] = Field(default_factory=list)
    failure_domain: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, int] = Field(default_factory=dict)
    kind: str = "full"  # "full" or "delta"; absent in older manifests (= full); added without a version bump
    chain: ChainLink | None = None
    # what reading it from the store said, never written into it (Repository.get_manifest)
    _stored: dt.datetime | None = PrivateAttr(default=None)  # when the store received it (its own clock)
    _flag: str | None = PrivateAttr(default=None)  # why its stated times are not believed (drtool/repo/times.py)
    _generation: int = PrivateAttr(default=0)  # the key generation that sealed it

    @property
    def is_delta(self) -> bool:
        return self.kind == "delta"

    @property
    def flag(self) -> str | None:
        return self._flag

    @property
    def trusted(self) -> bool:
        """Whether its times agree with the store's clock: only such backups are chosen or counted."""
        return self._flag is None

    @property
    def stored(self) -> dt.datetime | None:
        return self._stored

    @property
    def generation(self) -> int:
        return self._generation

    def mark(self, stored: dt.datetime | None, flag: str | None, generation: int) -> Manifest:
        self._stored, self._flag, self._generation = stored, flag, generation
        return self

    def encode(self) -> bytes:
        return zstandard.ZstdCompressor(level=6).compress(self.model_dump_json().encode())

    @classmethod
    def decode(cls, data: bytes, backup_id: str, lighten: Callable[[bytes], bytes] | None = None) -> Manifest:
        """``lighten`` may rewrite the JSON before it is parsed (prune cuts the chunk lists out:
        drtool/repo/chunk_lists.py)."""
        try:
            raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_MANIFEST_BYTES)
            manifest = cls.model_validate_json(lighten(raw) if lighten else raw)
        except (zstandard.ZstdError, ValidationError, ValueError) as exc:
            raise IntegrityError(f"manifest {backup_id} does not decode: {str(exc).splitlines()[0]}") from None
        if manifest.version != MANIFEST_VERSION:
            raise IntegrityError(f"manifest {backup_id} has unknown version {manifest.version}")
        if manifest.id != backup_id:
            raise IntegrityError(f"manifest {backup_id} claims to be backup {manifest.id}")
        return manifest

    def artifacts_of(self, plugin: str) -> list[ArtifactEntry]:
        return [a for a in self.artifacts if a.plugin == plugin]

    @property
    def size(self) -> int:
        return sum(a.size for a in self.artifacts)
