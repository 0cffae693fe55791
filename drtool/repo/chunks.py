"""How a store keeps chunks, as the writer, reader, check and prune see it: one object per chunk (format 1,
drtool/repo/loose.py) or chunks in pack files with an index (format 2, drtool/repo/packed.py).

Everything above this interface (manifests, sessions, plugins' streams) is the same for both formats.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

ChunkRef = tuple[str, int]  # (chunk id, plaintext length), as a manifest lists them
Verified = tuple[str, bytes]  # (chunk id, plaintext) whose content was re-hashed and found to match the id
Buffer = bytes | bytearray | memoryview


@dataclasses.dataclass(frozen=True)
class Fetch:
    """Some consecutive chunks of an artifact that one request fetches (a ranged GET of a pack, or one loose
    chunk); ``size`` is their plaintext bytes, what a reader holds once they are opened."""

    size: int
    run: Callable[[], list[Verified]]


class Stats:
    """A backup's counters, shared by the threads that store chunks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = {"bytes_read": 0, "bytes_stored": 0, "chunks": 0, "chunks_new": 0, "bytes_reused": 0}

    def add(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                self.values[k] = self.values.get(k, 0) + v


class ChunkStream(Protocol):
    """The chunks of one artifact, in order."""

    def add(self, chunk: Buffer) -> None:
        """Take a chunk; it must not change afterwards (the chunker hands over views of immutable windows)."""
        ...

    def finish(self) -> list[ChunkRef]:
        """Every chunk handed over (not yet necessarily durable: ``ChunkWriter.flush`` makes it so)."""
        ...

    def abandon(self) -> None: ...


class ChunkWriter(Protocol):
    """One backup session's writes: deduplicated against the store and against each other."""

    def stream(self) -> ChunkStream: ...

    def __contains__(self, chunk_id: str) -> bool:
        """Whether the store holds the chunk or this session stored it (``reuse`` checks an old artifact)."""
        ...

    def flush(self) -> None:
        """Make every chunk handed over durable (and, in format 2, indexed): the barrier before a manifest."""
        ...

    def close(self) -> None: ...


class ChunkStore(Protocol):
    def writer(self, stats: Stats, workers: int) -> ChunkWriter: ...

    def reads(self, chunks: list[ChunkRef]) -> Iterator[Fetch]:
        """The fetches that yield ``chunks`` in order, each run on a reader's thread pool."""
        ...

    def missing(self, chunk_ids: set[str], workers: int) -> list[str]:
        """The chunks a restore would fail to read (preflight): not indexed, or their object is gone."""
        ...
