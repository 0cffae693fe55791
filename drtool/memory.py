"""Process-wide malloc setting for drtool's data path: at most two glibc arenas.

glibc gives threads that allocate at the same time arenas of their own, up to eight per core. The data
path's buffers (8 MiB runs, s3transfer's 8 MiB parts) are allocated on one thread and freed on another, so
freed memory ends up spread over a dozen arenas, each keeping its share. In the checkpoint restore that was
about 100 MiB of peak RSS (450 MiB against 350 with two arenas, at the same CPU seconds per GiB:
docs/performance.md). The buffers are large and few, so two arenas cost no measurable lock contention.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas before threads start; an operator's MALLOC_ARENA_MAX wins, and where the C
    library has no ``mallopt`` (not glibc) nothing changes."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas)
