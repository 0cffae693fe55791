"""The store's plaintext config object: what a reader needs before it has a key."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from drtool.errors import IntegrityError, UsageError

FORMAT_NAME = "drtool-store"
FORMAT_VERSION = 2  # what `drtool init` writes: chunks in packs (docs/store-format.md, "Format 2")
READABLE_VERSIONS = (1, 2)


class ChunkerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    algorithm: Literal["fastcdc-2020"] = "fastcdc-2020"
    min_size: int = 256 * 1024
    avg_size: int = 1024 * 1024
    max_size: int = 4 * 1024 * 1024
    normalized_chunking: int = 1


class PackParams(BaseModel):
    """Format 2: chunks are stored in pack files of about ``target_size`` bytes (docs/store-format.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    target_size: int = 16 * 1024 * 1024


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    store_id: str
    created: str
    chunker: ChunkerParams = ChunkerParams()
    compression: Literal["zstd"] = "zstd"
    compression_level: int = 3
    aead: Literal["aes-256-gcm"] = "aes-256-gcm"
    chunk_id: Literal["hmac-sha256", "blake3-keyed"] = "blake3-keyed"
    packs: PackParams | None = PackParams()  # None: format 1, one object per chunk

    @property
    def packed(self) -> bool:
        return self.version >= 2

    @classmethod
    def new(cls, **overrides: Any) -> StoreConfig:
        """A new store's config; ``version=1`` gives the format-1 defaults (loose chunks, HMAC ids)."""
        if overrides.get("version") == 1:
            overrides = {"chunk_id": "hmac-sha256", "packs": None} | overrides
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(store_id=secrets.token_hex(8), created=now, **overrides)

    @model_validator(mode="after")
    def _consistent(self) -> StoreConfig:
        if (self.packs is not None) != self.packed:
            raise ValueError("format 2 stores chunks in packs (a `packs` field), format 1 does not")
        return self

    def to_bytes(self) -> bytes:
        # a format-1 config stays byte-compatible with drtool 0.1, which refuses unknown fields
        return self.model_dump_json(indent=1, exclude={"packs"} if self.packs is None else None).encode()

    @classmethod
    def from_bytes(cls, data: bytes, url: str) -> StoreConfig:
        try:
            raw = json.loads(data)
        except ValueError:
            raise IntegrityError(f"store config at {url} is not JSON", "is this a drtool store?") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
            raise UsageError(f"{url} is not a drtool store", "give the URL `drtool init` was run with")
        if raw.get("version") not in READABLE_VERSIONS:
            raise UsageError(
                f"store {url} has format version {raw.get('version')}, this drtool reads "
                + " and ".join(map(str, READABLE_VERSIONS)),
                "use a drtool release that supports it",
            )
        if raw["version"] == 1:  # format 1 predates these fields: what it meant by leaving them out
            raw = {"chunk_id": "hmac-sha256", "packs": None} | raw
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise IntegrityError(f"store config at {url} is invalid: {exc.errors()[0]['msg']}") from None
