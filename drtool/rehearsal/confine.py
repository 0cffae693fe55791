"""What a restore's processes cannot do even inside the rehearsal's network namespace: get out of it.

A network namespace alone does not hold a process that keeps root's capabilities: it can ``setns`` back into
the host's namespace (``/proc/1/ns/net``) and reach everything, and a Unix socket on the host's filesystem is
reached by its path whatever the namespace. So, while the rehearsal's thread is inside (``children``), it also
stands in a mount namespace of its own, and what it (and every thread it starts) executes gets no
capabilities, down to the last grandchild:

- **no capabilities after exec**: ``SECBIT_NOROOT`` (uid 0 gets nothing from ``execve``), the inheritable and
  ambient sets emptied, and every mount ``nosuid`` (so neither set-user-ID programs nor file capabilities
  give any back). Without CAP_SYS_ADMIN a child cannot ``setns``, ``unshare`` a network or mount namespace
  of the host's, mount or unmount; without CAP_SYS_PTRACE it cannot open ``/proc/<pid>/ns``, ``root`` or
  ``fd`` of drtool or any other process that holds capabilities. The securebits cannot be changed back by a
  child (that needs CAP_SETPCAP).
- **the host's Unix sockets out of reach**: every pathname socket bound in drtool's own network namespace
  when the block starts (``host_sockets``: ``/proc/net/unix``) has ``/dev/null`` mounted over it, so a
  ``connect`` is refused. Abstract sockets belong to a network namespace and were never reachable.
- **the host's devices and kernel settings out of reach**: a fresh ``/dev`` (null, zero, full, random,
  urandom, tty, an empty ``/dev/shm``) instead of the host's disks and shared memory, and ``/proc/sys``,
  ``/proc/sysrq-trigger`` and ``/sys`` read-only (a uid-0 process writes ``core_pattern`` without any
  capability otherwise).

drtool's own thread keeps its capabilities (it must come back: ``setns`` to its mount namespace, its
securebits and sets restored on the way out; its working folder and umask stay its own from then on, as
``unshare(CLONE_FS)`` leaves them: a ``chdir`` on another thread no longer moves it). A forked child keeps
them until it executes a program, which drtool's code always does at once (``subprocess``; the lab's
PostgreSQL drops to its user first). What is not prevented is in docs/threat-model.md: a child still runs
as uid 0 on the host's filesystem, and a socket bound on the host after the block started is not covered.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from drtool.errors import UsageError

HINT = "rehearse with --isolation in-process"
CLONE_FS, CLONE_NEWNS = 0x00000200, 0x00020000
MS_RDONLY, MS_NOSUID, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x8, 0x1000, 0x4000, 1 << 18
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (Linux 5.12)
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
PR_GET_SECUREBITS, PR_SET_SECUREBITS, SECBIT_NOROOT = 27, 28, 0x1
PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 47, 1, 2, 4
CAPABILITY_VERSION_3 = 0x20080522
READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/sys")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]  # fmt: skip


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def available() -> str | None:
    """None when this kernel can confine the restore (mount_setattr, Linux 5.12), else why not (one line)."""
    attr = _MountAttr()
    done = _libc.syscall(SYS_MOUNT_SETATTR, -1, b"", 0, ctypes.byref(attr), ctypes.sizeof(attr))
    if done < 0 and ctypes.get_errno() == errno.ENOSYS:
        return "the kernel has no mount_setattr (Linux 5.12 or later is needed to confine the restore)"
    return None


def host_sockets(net_unix: Path = Path("/proc/thread-self/net/unix")) -> list[str]:
    """Paths of the Unix sockets bound in the calling thread's network namespace (abstract ones left out:
    they belong to the namespace, which the restore is not in)."""
    found = []
    for line in net_unix.read_text().splitlines()[1:]:
        fields = line.split(maxsplit=7)
        if len(fields) == 8 and fields[7].startswith("/") and fields[7] not in found:
            found.append(fields[7])
    return found


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, kind, data)]
    _check(_libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]), f"mount {target}")


def _set_attributes(path: str, attr_set: int, propagation: int = 0) -> None:
    attr = _MountAttr(attr_set, 0, propagation, 0)
    done = _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE, ctypes.byref(attr),
                         ctypes.sizeof(attr))  # fmt: skip
    _check(done, f"mount_setattr {path}")


def _fresh_dev() -> None:
    """A /dev with the harmless devices only: not the host's disks, consoles or shared memory."""
    numbers = {name: os.stat(f"/dev/{name}").st_rdev for name in DEVICES if os.path.exists(f"/dev/{name}")}
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name, rdev in numbers.items():
        os.mknod(f"/dev/{name}", 0o666 | stat.S_IFCHR, rdev)
        os.chmod(f"/dev/{name}", 0o666)
    for name, target in LINKS.items():
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID, "mode=1777")


def _cover(sockets: Iterable[str]) -> None:
    for path in sockets:
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
            _mount("/dev/null", path, None, MS_BIND)
        except OSError:
            continue  # gone since it was listed, or under the fresh /dev: nothing to cover


def _private_mounts(sockets: Iterable[str]) -> None:
    _check(_libc.unshare(CLONE_FS | CLONE_NEWNS), "unshare")
    _set_attributes("/", MOUNT_ATTR_NOSUID, MS_PRIVATE)  # nothing mounted here reaches the host, and back
    for path in READ_ONLY:
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _set_attributes(path, MOUNT_ATTR_RDONLY)
    _fresh_dev()
    _cover(sockets)


def _capabilities() -> tuple[_CapHeader, ctypes.Array[_CapData]]:
    header, data = _CapHeader(CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    return header, data


@contextlib.contextmanager
def _no_capabilities_after_exec() -> Iterator[None]:
    bits = _check(_libc.prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), "prctl")
    header, data = _capabilities()
    inheritable = [d.inheritable for d in data]
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    ambient = [c for c in range(last + 1) if _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1]
    _check(_libc.prctl(PR_SET_SECUREBITS, bits | SECBIT_NOROOT, 0, 0, 0), "prctl SECBIT_NOROOT")
    try:
        _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl ambient")
        for d in data:
            d.inheritable = 0
        _check(_libc.capset(ctypes.byref(header), data), "capset")
        yield
    finally:
        header, data = _capabilities()
        for d, value in zip(data, inheritable, strict=True):
            d.inheritable = value
        _check(_libc.capset(ctypes.byref(header), data), "capset")
        for cap in ambient:
            _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0)
        _check(_libc.prctl(PR_SET_SECUREBITS, bits, 0, 0, 0), "prctl securebits")


@contextlib.contextmanager
def children(sockets: Iterable[str]) -> Iterator[None]:
    """Until the block ends, what the calling thread executes runs confined (module docstring), with the
    ``sockets`` (paths) covered; the thread itself is back in drtool's mount namespace afterwards."""
    home = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY)
    cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            try:
                _private_mounts(sockets)
            except OSError as exc:  # a container that forbids mounts, a seccomp filter
                raise UsageError(f"cannot confine the rehearsal's restore: {exc}", HINT) from exc
            with _no_capabilities_after_exec():
                yield
        finally:
            # threads started inside share this fs_struct, and setns refuses a shared one: take a copy first
            _check(_libc.unshare(CLONE_FS), "unshare")
            _check(_libc.setns(home, CLONE_NEWNS), "setns")
            os.fchdir(cwd)  # setns moved the thread to the namespace's root
    finally:
        os.close(cwd)
        os.close(home)
