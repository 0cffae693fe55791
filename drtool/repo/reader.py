"""Reading an artifact back: chunks fetched ahead in parallel, each authenticated and re-hashed, and the
whole artifact's SHA-256 and size checked when the stream ends. A reader never returns unverified bytes
from a chunk; the whole-artifact check catches reordered or dropped chunks at EOF.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from drtool.errors import IntegrityError
from drtool.repo.manifest import ArtifactEntry
from drtool.repo.repository import Repository


class ArtifactReader:
    """``readahead`` fetches run ahead on ``pool``: chunks (format 1) or runs of chunks in a pack (format 2)."""

    def __init__(self, repo: Repository, entry: ArtifactEntry, pool: ThreadPoolExecutor, readahead: int | None = None):
        self.entry = entry
        self._pool = pool
        self._readahead = readahead or repo.chunks.readahead
        self._reads = repo.chunks.reads(entry.chunks)
        self._pending: deque[Future[list[bytes]]] = deque()
        self._ready: deque[bytes] = deque()
        self._expected = iter(entry.chunks)
        self._sha = hashlib.sha256()
        self._size = 0
        self._buf = memoryview(b"")
        self._finished = False

    def _fill(self) -> None:
        while len(self._pending) < self._readahead:
            read = next(self._reads, None)
            if read is None:
                return
            self._pending.append(self._pool.submit(read))

    def next_chunk(self) -> bytes | None:
        """The next verified chunk, or None at the end (after the whole-artifact check passed)."""
        if not self._ready:
            self._fill()
            if not self._pending:
                self._finish()
                return None
            self._ready.extend(self._pending.popleft().result())
            self._fill()
        data = self._ready.popleft()
        chunk_id, length = next(self._expected, ("(extra)", -1))
        if len(data) != length:
            raise IntegrityError(f"chunk {chunk_id[:12]} of {self.entry.name} has the wrong length")
        self._sha.update(data)
        self._size += len(data)
        return data

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._size != self.entry.size or self._sha.hexdigest() != self.entry.sha256:
            raise IntegrityError(
                f"artifact {self.entry.plugin}/{self.entry.name} does not match its recorded SHA-256",
                "the store is damaged; run `drtool check --read-data`",
            )

    def __iter__(self) -> Iterator[bytes]:
        if self._buf:
            yield bytes(self._buf)
            self._buf = memoryview(b"")
        while (chunk := self.next_chunk()) is not None:
            yield chunk

    def readinto(self, buffer: bytearray | memoryview) -> int:
        out = memoryview(buffer).cast("B")
        while not self._buf:
            chunk = self.next_chunk()
            if chunk is None:
                return 0
            self._buf = memoryview(chunk)
        n = min(len(out), len(self._buf))
        out[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(self)
        out = bytearray(n)
        got = 0
        while got < n:
            k = self.readinto(memoryview(out)[got:])
            if k == 0:
                break
            got += k
        return bytes(out[:got])

    def close(self) -> None:
        for f in self._pending:
            f.cancel()
        self._pending.clear()
