"""Ports for the servers drtool and its lab start: chosen so that nothing else on the machine takes them.

Binding port 0, closing the socket and handing the number to a server seconds later left two ways to lose
the port before the server binds it: the kernel hands the same number to another process's bind(0) (a
second test worker's lab, allocating at the same time), and any outgoing connection on the machine may get
it as its source port, since both come from the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``).
The server then exits with "address already in use" (a lab's kube-scheduler did here; CI's cert-manager,
its health port 40171 in that range, exited while starting the same way, most likely). So a port here is
taken outside the ephemeral range, where the kernel never picks a number on its own, and reserved
machine-wide for the reserving process's lifetime: a ``lockf`` byte-range lock at offset ``port`` of one
file, ``/tmp/drtool-ports.lock``. The kernel drops a process's locks when it exits (also after a crash or
``kill -9``), so nothing stale is left; a port some socket holds (a server listening, a connection's source
port) is skipped. The server started on the port runs on after its starter exits: from then on it is the
socket that keeps the number from being handed out again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

from drtool.errors import SourceError

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default, when the file cannot be read
FLOOR = 16384  # below it sit the well-known defaults servers bind on their own (8080, 9000, 5432, 6443)
LOCK_NAME = "drtool-ports.lock"

_guard = threading.Lock()
_mine: set[int] = set()  # reserved by this process: POSIX locks do not conflict with their own owner
_file: dict[str, int] = {}  # the lock file's one descriptor: closing any other would drop every lock


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's source-port range for outgoing connections and bind(0), inclusive."""
    try:
        low, high = (int(v) for v in path.read_text().split())
        return low, high
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL


def candidates(ephemeral: tuple[int, int] | None = None) -> list[int]:
    """The ports handed out: above ``FLOOR`` and outside the ephemeral range (its own ports only when the
    range leaves nothing outside it, as ``1024 65535`` does)."""
    low, high = ephemeral or ephemeral_range()
    outside = [p for p in range(FLOOR, 65536) if not low <= p <= high]
    return outside or list(range(max(low, 1024), high + 1))


@functools.cache
def _pool() -> tuple[int, ...]:
    return tuple(candidates())  # the range is the machine's: read once per process


def lock_path() -> Path:
    """One file for the machine: /tmp whatever TMPDIR a process was given (a child started with a TMPDIR of its
    own must still see everyone's reservations)."""
    shared = Path("/tmp")
    return (shared if shared.is_dir() else Path(tempfile.gettempdir())) / LOCK_NAME


def free_port() -> int:
    """A port no socket holds and no other process has reserved, reserved by this one until it exits."""
    pool = _pool()
    start = random.randrange(len(pool))  # where to start looking only: the lock decides who gets a port
    with _guard:
        for i in range(len(pool)):
            port = pool[(start + i) % len(pool)]
            if port not in _mine and reserve(port):
                return port
    raise SourceError(
        f"no free port among {len(pool)} outside the ephemeral range",
        f"every one is in use or reserved ({lock_path()})",
    )


def reserve(port: int) -> bool:
    """Reserve ``port`` for this process if no other process has and no socket holds it."""
    fd = _lock_fd()
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    if _bindable(port):
        _mine.add(port)
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, port)
    return False


def _bindable(port: int) -> bool:
    """No socket holds ``port``: binds without SO_REUSEADDR on every IPv4 address (a listener or a
    connection's source port on any of them refuses it) and every IPv6 one succeed."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((address, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE and family == socket.AF_INET6:
                continue  # no IPv6 on this machine: nothing can hold the port there
            return False
    return True


def _lock_fd() -> int:
    path = str(lock_path())
    if path not in _file:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        with contextlib.suppress(PermissionError):  # another user created it: shared already
            os.fchmod(fd, 0o666)  # every user's servers share it (the umask would narrow it)
        _file[path] = fd
    return _file[path]


def _after_fork() -> None:
    """A forked child owns none of its parent's locks (POSIX locks are per process) and must not inherit a
    guard some other thread held at the fork."""
    global _guard
    _guard = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
