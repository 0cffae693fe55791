"""Writing a large object into a local store past the page cache (``O_DIRECT``), where the filesystem allows it.

A backup writes each pack once and reads it rarely, and fsyncs it right away. Through the page cache every
stored byte is copied by the kernel into newly allocated cache pages, only to be written out and left there,
pushing out what the machine's other programs had cached: in `perf` samples of a 1 GiB backup into a local
store that copy and the page allocation behind it were 1.6 CPU-s of the backup's 5.9 (docs/performance.md).
Written with ``O_DIRECT``, the disk reads the bytes from the writer's own buffer instead.

``O_DIRECT`` wants the buffer, the file offset and the length aligned to the device's logical block. A pack is
any length and Python's buffers are not aligned, so the bytes go through a page-aligned staging buffer of the
writing thread (``STAGE``), in whole blocks of ``ALIGN``; what is left after the last whole block is written
the ordinary way. Where the filesystem refuses ``O_DIRECT`` (or a write under it), the object is written
through the page cache as before and this store writes that way from then on. The caller fsyncs as before:
``O_DIRECT`` skips the cache, not the device's own, nor the file's metadata.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import threading

ALIGN = 4096  # a logical block size multiple for every common device (512-byte and 4 KiB sectors)
STAGE = 1 << 20  # bytes per direct write, through the thread's staging buffer
DIRECT_MIN = 1 << 20  # smaller objects (manifests, locks, index objects of small stores) use the page cache
_REFUSED = (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP)

_staging = threading.local()


def supported() -> bool:
    """Whether this system has ``O_DIRECT`` at all (Linux and most Unix systems; not macOS)."""
    return hasattr(os, "O_DIRECT")


def write(fd: int, data: bytes | bytearray | memoryview) -> bool:
    """Write ``data`` into the empty file ``fd`` past the page cache; the part after the last whole ``ALIGN``
    block, if any, with ``O_DIRECT`` switched off again. False, with the file empty again and ``O_DIRECT``
    off, when the filesystem refuses direct writes: the caller then writes the ordinary way."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT)
        offset = _write_blocks(fd, memoryview(data).cast("B"))
    except OSError as exc:
        if exc.errno not in _REFUSED:
            raise
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        return False
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    rest = memoryview(data).cast("B")[offset:]
    while rest:
        rest = rest[os.write(fd, rest) :]
    return True


def _write_blocks(fd: int, view: memoryview) -> int:
    """Write the whole ``ALIGN`` blocks of ``view`` through the staging buffer; return how many bytes."""
    stage = _stage()
    whole = len(view) // ALIGN * ALIGN
    offset = 0
    while offset < whole:
        n = min(STAGE, whole - offset)
        stage[:n] = view[offset : offset + n]
        done = 0
        with memoryview(stage) as out:
            while done < n:
                done += os.write(fd, out[done:n])
        offset += n
    return offset


def _stage() -> mmap.mmap:
    """This thread's staging buffer: anonymous memory, so page-aligned, and kept for the thread's next pack."""
    stage = getattr(_staging, "buffer", None)
    if stage is None:
        stage = _staging.buffer = mmap.mmap(-1, STAGE)
    return stage
