"""Memory of drtool's data path: a process-wide cap of two glibc arenas, and the byte budget that bounds
what parallel readers hold fetched ahead (restore's artifact readers, a backup's ranged source reads).

glibc gives threads that allocate at the same time arenas of their own, up to eight per core. The data
path's buffers (8 MiB runs, s3transfer's 8 MiB parts) are allocated on one thread and freed on another, so
freed memory ends up spread over a dozen arenas, each keeping its share. In the checkpoint restore that was
about 100 MiB of peak RSS (450 MiB against 350 with two arenas, at the same CPU seconds per GiB:
docs/performance.md). The buffers are large and few, so two arenas cost no measurable lock contention.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import threading

M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas before threads start; an operator's MALLOC_ARENA_MAX wins, and where the C
    library has no ``mallopt`` (not glibc) nothing changes."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas)


def fewer_collections() -> None:
    """Keep Python's cyclic garbage collector off the data path, once the command's imports are done.

    In py-spy samples of a 1 GiB checkpoint restore, the collector was 39 % of drtool's CPU samples (backup:
    19 %): with CPython's default thresholds a young collection runs every 700 allocations and a full one
    traverses every live object, the imported modules' and botocore's parsed JSON models included. Frozen,
    what the imports made (never garbage) is no longer traversed; young collections run every 100,000
    allocations. Paired runs, 1 GiB in 8 shards: backup 5.20 -> 4.56 CPU-s, restore 5.36 -> 4.92, peak RSS
    unchanged (docs/performance.md, "The S3 path"). Reference cycles still get collected, a little later.
    """
    gc.freeze()
    gc.set_threshold(100_000, 20, 20)


DEFAULT_BUDGET = 64 * 1024 * 1024  # bytes fetched ahead by all the readers sharing one budget


class ByteBudget:
    """Bytes fetched and not yet handed on, shared by every reader of one restore (or of one backup's
    ranged source reads), so N readers at once hold about what one would, not N times its read-ahead.

    A reader only *tries* to take from it for read-ahead; its first fetch (nothing else held by it) is
    always granted, overdrawing if need be, so every reader makes progress and a caller that reads two
    streams in one thread never waits for itself. The bound is therefore ``limit`` plus one fetch per
    open reader.
    """

    def __init__(self, limit: int = DEFAULT_BUDGET) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    def claim(self, n: int, held: int) -> bool:
        """Take ``n`` bytes for a reader already holding ``held``: always granted when it holds nothing,
        else only within the limit."""
        with self._lock:
            if held and self._used + n > self.limit:
                return False
            self._used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self._used -= n
