"""The snapshot stream: etcd's bbolt database followed by the SHA-256 of that database (32 bytes).

etcd appends the digest so that a snapshot file proves itself: ``etcdutl snapshot restore`` checks it
too (it recognises a file of size 512*n + 32 as "db + hash"). drtool keeps the file exactly as etcd sent
it and checks the digest twice without ever holding the snapshot in memory: while it streams out of
etcd into the store, and again while it streams out of the store onto the restore host.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from drtool.errors import IntegrityError, SourceError

from .client import unb64

DIGEST_SIZE = 32


class Sink(Protocol):
    def write(self, data: bytes | bytearray | memoryview) -> int: ...


class SnapshotDigest:
    """SHA-256 of everything but the last 32 bytes seen, which must equal it.

    The stream's end is not known in advance, so the most recent 32 bytes are held back (a rolling
    tail) and only bytes that can no longer be part of the trailer are hashed.
    """

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._tail = b""
        self.size = 0

    def update(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        if len(data) >= DIGEST_SIZE:
            self._sha.update(self._tail)
            self._sha.update(memoryview(data)[:-DIGEST_SIZE])
            self._tail = bytes(data[-DIGEST_SIZE:])
            return
        buf = self._tail + bytes(data)
        cut = max(0, len(buf) - DIGEST_SIZE)
        self._sha.update(buf[:cut])
        self._tail = buf[cut:]

    @property
    def db_size(self) -> int:
        return max(0, self.size - DIGEST_SIZE)

    def verify(self, what: str) -> str:
        """The database's hex SHA-256 if the trailer matches; IntegrityError otherwise."""
        if self.size <= DIGEST_SIZE:
            raise IntegrityError(f"{what} is too short to be an etcd snapshot ({self.size} bytes)")
        digest = self._sha.digest()
        if digest != self._tail:
            raise IntegrityError(
                f"{what} does not match the SHA-256 etcd appended to it "
                f"(computed {digest.hex()[:16]}…, embedded {self._tail.hex()[:16]}…)",
                "the snapshot was corrupted in transit or at rest; take a new backup / use another one",
            )
        return digest.hex()


@dataclasses.dataclass
class StreamedSnapshot:
    """What streaming a snapshot out of etcd learned."""

    db_size: int
    sha256: str
    header: Mapping[str, Any]


def copy_snapshot(
    messages: Iterable[Mapping[str, Any]], sink: Sink, endpoint: str, progress: Any = None
) -> StreamedSnapshot:
    """Write every blob of the stream to ``sink`` (trailer included) and check size and digest.

    The expected database size comes from the first message (its blob plus ``remaining_bytes``); a
    stream that ends short is a source failure (SourceError), a wrong digest is corruption (IntegrityError).
    """
    digest = SnapshotDigest()
    expected: int | None = None
    header: Mapping[str, Any] = {}
    for message in messages:
        blob = unb64(message.get("blob"))
        if expected is None:
            expected = len(blob) + int(message.get("remaining_bytes") or 0)
        header = header or message.get("header") or {}
        digest.update(blob)
        sink.write(blob)
        if progress is not None:
            progress.advance(len(blob))
    total = (expected or 0) + DIGEST_SIZE
    if digest.size != total:
        raise SourceError(
            f"the snapshot stream from etcd at {endpoint} ended after {digest.size} of {total} bytes",
            "etcd or the network dropped the connection; retry the backup",
        )
    return StreamedSnapshot(digest.db_size, digest.verify(f"the snapshot from etcd at {endpoint}"), header)
