"""The store's plaintext config object: what a reader needs before it has a key."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from drtool.errors import IntegrityError, UsageError

FORMAT_NAME = "drtool-store"
FORMAT_VERSION = 1


class ChunkerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    algorithm: Literal["fastcdc-2020"] = "fastcdc-2020"
    min_size: int = 256 * 1024
    avg_size: int = 1024 * 1024
    max_size: int = 4 * 1024 * 1024
    normalized_chunking: int = 1


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
    chunk_id: Literal["hmac-sha256"] = "hmac-sha256"

    @classmethod
    def new(cls, **overrides: Any) -> StoreConfig:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(store_id=secrets.token_hex(8), created=now, **overrides)

    def to_bytes(self) -> bytes:
        return self.model_dump_json(indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, url: str) -> StoreConfig:
        try:
            raw = json.loads(data)
        except ValueError:
            raise IntegrityError(f"store config at {url} is not JSON", "is this a drtool store?") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
            raise UsageError(f"{url} is not a drtool store", "give the URL `drtool init` was run with")
        if raw.get("version") != FORMAT_VERSION:
            raise UsageError(
                f"store {url} has format version {raw.get('version')}, this drtool reads {FORMAT_VERSION}",
                "use a drtool release that supports it",
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise IntegrityError(f"store config at {url} is invalid: {exc.errors()[0]['msg']}") from None
