"""When a file was created: the anchor of a local store's "when the store received this object".

A backup's stated times are checked against the time the store received its manifest (drtool/repo/times.py).
Locally that must be a time a writer cannot move with a metadata change: the inode's change time moves on
``chmod``, ``chown``, ``touch``, ``utime`` and ``rename``, so one ``chmod 600 manifests/*`` made every backup
look back-dated. The birth time does not move under any of those; only a new inode (a copy put in place)
has a new one. Python 3.11 has no ``st_birthtime`` on Linux, so it is read with ``statx(2)`` through libc.

Where the filesystem keeps no birth time (some NFS servers, old tmpfs, FAT), ``None`` is returned and the
caller falls back to the change time (docs/threat-model.md says what that costs).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import os
import struct
from collections.abc import Callable

_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_EMPTY_PATH = 0x1000
_STATX_BTIME = 0x800
_STATX_SIZE = 256  # struct statx is 256 bytes on every Linux architecture
_BTIME_OFFSET = 80  # struct statx_timestamp stx_btime: __s64 tv_sec, __u32 tv_nsec


def _load_statx() -> Callable[..., int] | None:
    try:
        # the running program's symbols, libc's among them: ctypes.util.find_library("c") would start an
        # `ldconfig -p` child on every import (a fork of the whole interpreter, on every drtool command)
        libc = ctypes.CDLL(None, use_errno=True)
        statx: Callable[..., int] = libc.statx
    except (OSError, AttributeError):  # not Linux, or a libc older than glibc 2.28
        return None
    statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    statx.restype = ctypes.c_int
    return statx


_statx = _load_statx()


def birth_time(path: str | os.PathLike[str] | None = None, fd: int | None = None) -> dt.datetime | None:
    """When the file at ``path`` (or the open ``fd``) was created, or None where that is not known.

    Raises FileNotFoundError for a missing file, like ``os.stat``."""
    if path is not None and fd is None:
        found = getattr(os.stat(path), "st_birthtime", None)  # macOS, the BSDs, Python 3.12+ on Windows
        if found is not None:
            return dt.datetime.fromtimestamp(found, dt.UTC)
    if _statx is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if fd is not None:
        rc = _statx(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, buf)
    else:
        rc = _statx(_AT_FDCWD, os.fsencode(path or ""), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, buf)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path) if path is not None else None)
    mask = struct.unpack_from("<I", buf.raw, 0)[0]
    if not mask & _STATX_BTIME:
        return None
    seconds, nanos = struct.unpack_from("<qI", buf.raw, _BTIME_OFFSET)
    return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=nanos // 1000)
