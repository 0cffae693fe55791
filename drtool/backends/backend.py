"""The backend contract every store location implements (local directory, S3).

A backend stores immutable named objects. It knows nothing of encryption, chunks or manifests.
Contract (tested by one conformance suite over every backend, tests/store/test_backend_conformance.py):
- ``put`` is atomic: after it returns the whole object is readable, before it nothing is. An
  ``exclusive=True`` put is also durable when it returns, and raises ObjectExists instead of replacing an
  existing object; other puts are durable after the next ``sync`` (so a backend may batch directory
  flushes: the manifest, written exclusively after ``sync``, never names a chunk that could be lost).
  A ``write_once=True`` put creates the object only if it is absent, like ``exclusive``, and treats an
  existing one as already written (chunks and packs: their names are their content or random), durable
  after ``sync``. Only a plain put replaces (a lock's refresh). drtool's write-once objects never use it,
  so a bucket policy that refuses unconditional writes leaves drtool working (docs/reliability.md).
- ``get_timed`` and ``list_timed`` also give each object's *server-set* time: when the store received
  it, which no writer chooses and no metadata change moves (S3 ``LastModified``, the first version holding
  the same bytes where versions can be listed; locally the file's birth time, which ``chmod``, ``touch``,
  ``utime`` and renames leave alone: drtool/backends/birth.py). Backup times are checked against it
  (drtool/repo/times.py). A backend that keeps versions may also offer ``received_first(name)`` (S3): the
  first time its current bytes were received, asked only when ``get_timed``'s time looks back-dated.
- ``get`` raises NotFound for a missing object, StoreUnavailable when the location cannot be reached.
  ``get_range`` reads ``length`` bytes from ``start`` (fewer only at the object's end), with the same errors.
- ``list`` yields the names under a prefix, in no promised order.
- ``delete`` of a missing object is not an error (idempotent).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Protocol, runtime_checkable
from urllib.parse import urlparse

from drtool.errors import UsageError

log = logging.getLogger(__name__)


@runtime_checkable
class Backend(Protocol):
    url: str

    def create(self) -> None:
        """Make the location ready for a new store (a directory is created; a bucket must already exist)."""
        ...

    def put(self, name: str, data: bytes, *, exclusive: bool = False, write_once: bool = False) -> None: ...

    def sync(self) -> None:
        """Make every ``put`` that has returned durable (a barrier before a manifest is written)."""
        ...

    def get(self, name: str) -> bytes: ...

    def get_range(self, name: str, start: int, length: int) -> bytes:
        """Bytes ``start`` to ``start + length`` of an object: a restore reads a run of chunks out of a pack."""
        ...

    def get_timed(self, name: str) -> tuple[bytes, dt.datetime]:
        """An object and when the store received it (UTC), from one read."""
        ...

    def list_timed(self, prefix: str = "") -> Iterator[tuple[str, dt.datetime]]:
        """``list`` with each object's server-set time."""
        ...

    def exists(self, name: str) -> bool: ...

    def size(self, name: str) -> int: ...

    def list(self, prefix: str = "") -> Iterator[str]: ...

    def delete(self, name: str) -> None: ...

    def endpoint(self) -> str:
        """The network address the backend talks to ("" for a local path), for the independence report."""
        ...


def open_backend(url: str) -> Backend:
    """Open the backend a store URL names: a path or file:// URL, or s3://bucket[/prefix]."""
    parsed = urlparse(url)
    log.debug("opening store %s", url)
    if parsed.scheme in ("", "file"):
        from drtool.backends.local import LocalBackend

        return LocalBackend(parsed.path if parsed.scheme == "file" else url)
    if parsed.scheme == "s3":
        from drtool.backends.s3 import S3Backend

        return S3Backend(url)
    raise UsageError(f"unsupported store URL {url!r}", "use a local path, file:///path or s3://bucket/prefix")
