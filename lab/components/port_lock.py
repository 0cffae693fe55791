"""A machine-wide lock for a port a server binds on every address and no flag moves, held by the server itself.

Velero v1.18.3's controller manager serves its metrics on :8080 whatever it is told (velero.py), so two
labs' Velero on one machine (two test runs, a bench next to a test) cannot both run: the second one's server
would exit at start with "address already in use". Before such a server starts, the lab takes an exclusive
``flock(2)`` on ``<system temp dir>/drtool-port-<port>.lock`` and hands the open file to the server process
(``pass_fds``): the lock then lasts exactly as long as the server and the children it starts, and the kernel
drops it when the last of them exits, also after a crash or a ``kill -9`` (no stale lock to clean up). The
holder writes who it is into the file; a second lab WAITS, printing a progress line naming the holder every
``every`` seconds, and after ``timeout`` gives up with one line naming it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from drtool.errors import SourceError

PROGRESS_EVERY = 15.0


def lock_path(port: int) -> Path:
    return Path(tempfile.gettempdir()) / f"drtool-port-{port}.lock"


class PortLock:
    """The open, locked file: ``fd`` goes to the server (``pass_fds``); ``record`` names the holder."""

    def __init__(self, port: int, fd: int) -> None:
        self.port, self.fd = port, fd

    def record(self, holder: str) -> None:
        since = dt.datetime.now(dt.UTC).strftime("%H:%M:%S UTC")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{holder}, since {since}".encode(), 0)


def holder(port: int) -> str:
    """Who holds ``port``'s lock, as the holder wrote it (best effort: the file may be mid-write)."""
    try:
        return lock_path(port).read_text().strip() or "a lab starting its server"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def held(
    port: int, what: str, timeout: float, every: float = PROGRESS_EVERY, out: TextIO | None = None
) -> Iterator[PortLock]:
    """The lock on ``port`` for the ``with`` block, waiting for it at most ``timeout`` seconds.

    Leaving the block closes this process's copy only: a server started inside with ``pass_fds=(lock.fd,)``
    keeps holding it until it exits.
    """
    out = out or sys.stderr
    fd = os.open(lock_path(port), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _wait(fd, port, what, timeout, every, out)
        lock = PortLock(port, fd)
        lock.record(f"{what} starting (lab process {os.getpid()})")
        yield lock
    finally:
        os.close(fd)


def _wait(fd: int, port: int, what: str, timeout: float, every: float, out: TextIO) -> None:
    start = time.monotonic()
    next_line = start
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if waited >= timeout:
            raise SourceError(
                f"{what} waited {waited:.0f}s for port {port}, still held by {holder(port)}",
                "one per machine: wait for it, or stop that lab (drtool lab down NAME)",
            )
        if time.monotonic() >= next_line:
            print(f"{what}: waiting for port {port} (one per machine), held by {holder(port)}; "
                  f"{waited:.0f}s of at most {timeout:.0f}s", file=out, flush=True)  # fmt: skip
            next_line += every
        time.sleep(0.2)
