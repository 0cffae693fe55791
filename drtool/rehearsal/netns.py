"""Network namespaces (iproute2 ``ip netns``) that a rehearsal runs in, and moving a thread into one.

A namespace made here has only loopback, with every address routed to it (``ip route add local default dev
lo``): a connection to an address that nothing in the namespace serves is refused at once by the kernel,
instead of waiting for a route that does not exist, and it passes the loopback device, where the witness
(witness.py) sees it. The host's network, the source cluster included, does not exist in there.

A thread enters a namespace with ``setns(2)``; what it starts afterwards — threads and subprocesses —
is born inside. So the rehearsal's own thread enters (``entered``), and everything the restore starts
(etcdutl, git, helm, a restored etcd, the target lab's servers) lives in the namespace, while threads
started before stay on the host: the relays (relay.py) accept inside and connect outside that way.
Needs root (CAP_SYS_ADMIN) and iproute2; ``available()`` says whether this machine allows it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from drtool.environ import child_env
from drtool.errors import UsageError

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, env=child_env())


def available() -> str | None:
    """None when namespaces can be made here, else why not (one line)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    if os.geteuid() != 0:
        return "creating a network namespace needs root"
    return None


@contextlib.contextmanager
def namespace() -> Iterator[str]:
    """A new namespace with loopback up and every address routed to it; deleted afterwards."""
    why = available()
    if why:
        raise UsageError(f"a network namespace is not possible here: {why}", "rehearse with --isolation in-process")
    name = f"drtool-{secrets.token_hex(4)}"
    created = _ip("netns", "add", name)
    if created.returncode != 0:
        raise UsageError(
            f"cannot create network namespace {name}: {created.stderr.strip()}", "use --isolation in-process"
        )
    try:
        for setup in (("link", "set", "lo", "up"), ("route", "add", "local", "0.0.0.0/0", "dev", "lo"),
                      ("-6", "route", "add", "local", "::/0", "dev", "lo")):  # fmt: skip
            done = _ip("-n", name, *setup)
            if done.returncode != 0:
                raise UsageError(
                    f"cannot set up {name} ({' '.join(setup)}): {done.stderr.strip()}", "use --isolation in-process"
                )
        yield name
    finally:
        _ip("netns", "delete", name)


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """The calling thread (and what it starts from now on) is inside namespace ``name`` until the block ends."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    inside = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        _setns(inside)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(inside)
        os.close(home)


def in_namespace(name: str, make: Callable[[], T]) -> T:
    """``make()`` run on a short-lived thread inside ``name``: sockets it opens belong to the namespace."""
    result: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            with entered(name):
                result.append(make())
        except BaseException as exc:  # handed to the caller's thread
            error.append(exc)

    thread = threading.Thread(target=run, name="drtool-netns")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
