"""Reading one large source object as parallel ranged GETs, handed on strictly in order as one stream.

One GET stream runs at the speed of one connection (kopia#5113's users: 5-6 MB/s on one 400 GB file), so
an object at or above ``threshold`` is fetched as ``range_size`` ranges, ``in_flight`` of them at once.
The ranges are fetched on a pool shared by every object of the plugin run, and what is fetched and not yet
read comes out of one ``ByteBudget`` for them all: ``workers`` large objects at once hold what the budget
allows, not ``workers x in_flight`` ranges. A stream's first range is always granted, so each one makes
progress. Smaller objects keep one GET: one request is cheaper than several.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from drtool.memory import ByteBudget

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class RangedReads:
    """When and how an object is read in ranges (docs/checkpoints.md, "Large objects")."""

    threshold: int = 1 << 30  # smaller objects: one GET (docs/checkpoints.md says why 1 GiB)
    range_size: int = 8 * MiB
    in_flight: int = 4  # ranges fetched at once per object


class RangedStream:
    """A read-only stream of ``size`` bytes fetched as ranges by ``fetch(start, length)`` (a range's bytes
    as a list of blocks), ahead of the reader within the budget. A block is handed on as it is when the
    caller asks for at least its size, so the copy loop's 1 MiB reads do not copy each range once more.
    A fetch's exception (``Changed``, ``SourceError``) is raised by the ``read`` that reaches its range."""

    def __init__(
        self,
        fetch: Callable[[int, int], list[bytes]],
        size: int,
        reads: RangedReads,
        pool: ThreadPoolExecutor,
        budget: ByteBudget,
    ) -> None:
        self._fetch = fetch
        self._size = size
        self._reads = reads
        self._pool = pool
        self._budget = budget
        self._next = 0  # start of the next range to fetch
        self._pending: deque[tuple[int, Future[list[bytes]]]] = deque()
        self._held = 0  # budget taken for the pending ranges and the one being read
        self._blocks: deque[bytes] = deque()  # what is left of the range being read
        self._current = 0  # its length, counted in _held until it is used up
        self._fill()

    def _fill(self) -> None:
        while len(self._pending) < self._reads.in_flight and self._next < self._size:
            length = min(self._reads.range_size, self._size - self._next)
            if not self._budget.claim(length, self._held):
                return
            self._held += length
            self._pending.append((length, self._pool.submit(self._fetch, self._next, length)))
            self._next += length

    def _advance(self) -> bool:
        """Release the range used up and move to the next one; False at the end."""
        self._release(self._current)
        self._current = 0
        self._fill()
        if not self._pending:
            return False
        self._current, future = self._pending.popleft()
        self._blocks = deque(future.result())  # still counted in _held: given back when used up, or by close()
        self._fill()
        return True

    def _release(self, n: int) -> None:
        self._held -= n
        self._budget.give(n)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes, all that is left when ``n`` is negative; b"" at the end."""
        if n < 0:
            return b"".join(iter(functools.partial(self.read, self._reads.range_size), b""))
        while not self._blocks:
            if not self._advance():
                return b""
        block = self._blocks[0]
        if len(block) <= n:
            return self._blocks.popleft()
        self._blocks[0] = block[n:]
        return block[:n]

    def close(self) -> None:
        """Stop: cancel the ranges not started and give back everything held (a running fetch finishes and
        is dropped)."""
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self._blocks.clear()
        self._release(self._held)


class RangePool:
    """The threads and the byte budget shared by the ranged reads of one plugin run."""

    def __init__(self, reads: RangedReads, workers: int) -> None:
        self.reads = reads
        self.budget = ByteBudget()
        self._pool = ThreadPoolExecutor(workers * reads.in_flight, thread_name_prefix="ckpt-range")

    def applies(self, size: int) -> bool:
        return size >= self.reads.threshold

    def stream(self, fetch: Callable[[int, int], list[bytes]], size: int) -> RangedStream:
        return RangedStream(fetch, size, self.reads, self._pool, self.budget)

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> RangePool:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
