"""Reading an artifact back: chunks fetched ahead in parallel within a byte budget, each authenticated and
re-hashed, and the sequence checked against the manifest.

Integrity without a second pass over the bytes: every chunk a fetch returns was re-hashed to its keyed id
(``open_blob``, ``LooseStore.decode``), and the reader checks that those ids are exactly the ones the
authenticated manifest lists, in its order, with their lengths. A reordered, dropped, repeated or foreign
chunk is caught there, which is what recomputing the whole artifact's SHA-256 used to catch, at 0.9 CPU-s
per GiB (docs/store-format.md, "Reading an artifact"). A reader never returns unverified bytes.

Memory: the fetched-but-unread bytes of every reader of one restore come out of one ``ByteBudget``, so four
objects restored at once hold what one would, not four times its read-ahead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from drtool.errors import IntegrityError
from drtool.memory import ByteBudget
from drtool.repo.chunks import Fetch, Verified
from drtool.repo.manifest import ArtifactEntry
from drtool.repo.repository import Repository


class ArtifactReader:
    """Fetches (runs of chunks in a pack, or loose chunks) run ahead on ``pool``: at most ``ahead`` at once,
    and beyond the first only while ``budget`` allows."""

    def __init__(
        self, repo: Repository, entry: ArtifactEntry, pool: ThreadPoolExecutor, budget: ByteBudget, ahead: int
    ) -> None:
        self.entry = entry
        self._pool = pool
        self._budget = budget
        self._ahead = max(1, ahead)
        self._fetches = repo.chunks.reads(entry.chunks)
        self._next: Fetch | None = None
        self._pending: deque[Future[list[Verified]]] = deque()
        self._ready: deque[Verified] = deque()
        self._held = 0  # budget taken for what is pending or ready
        self._expected = iter(entry.chunks)
        self._size = 0
        self._buf = memoryview(b"")
        self._finished = False

    def _fill(self) -> None:
        while len(self._pending) < self._ahead:
            if self._next is None:
                self._next = next(self._fetches, None)
                if self._next is None:
                    return
            fetch = self._next
            if not self._budget.claim(fetch.size, self._held):
                return
            self._held += fetch.size
            self._next = None
            self._pending.append(self._pool.submit(fetch.run))

    def next_chunk(self) -> bytes | None:
        """The next verified chunk, or None at the end (after the length check passed)."""
        if not self._ready:
            self._fill()
            if not self._pending:
                self._finish()
                return None
            self._ready.extend(self._pending[0].result())
            self._pending.popleft()
            self._fill()
        chunk_id, data = self._ready.popleft()
        self._held -= len(data)
        self._budget.give(len(data))
        expected, length = next(self._expected, ("(none)", -1))
        if chunk_id != expected or len(data) != length:
            raise IntegrityError(
                f"artifact {self.entry.plugin}/{self.entry.name}: chunk {self._size}+ is {chunk_id[:12]} "
                f"({len(data)} bytes), its manifest lists {expected[:12]} ({length} bytes)",
                "the store is damaged; run `drtool check --read-data`",
            )
        self._size += len(data)
        return data

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._size != self.entry.size or next(self._expected, None) is not None:
            raise IntegrityError(
                f"artifact {self.entry.plugin}/{self.entry.name} ended after {self._size} of {self.entry.size} bytes",
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
        """Up to ``n`` bytes (all that is left when ``n`` is negative): a whole chunk is returned as it is,
        several are joined once."""
        if n is None or n < 0:
            return b"".join(self)
        pieces: list[memoryview] = []
        got = 0
        while got < n:
            if not self._buf:
                chunk = self.next_chunk()
                if chunk is None:
                    break
                self._buf = memoryview(chunk)
            piece = self._buf[: n - got]
            self._buf = self._buf[len(piece) :]
            pieces.append(piece)
            got += len(piece)
        if len(pieces) == 1 and isinstance(pieces[0].obj, bytes) and len(pieces[0]) == len(pieces[0].obj):
            return pieces[0].obj  # a whole chunk: no copy
        return b"".join(pieces)

    def close(self) -> None:
        """Stop reading: cancel what has not started, and give back the budget of everything held."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._ready.clear()
        self._budget.give(self._held)
        self._held = 0
