"""Running a rehearsal inside a fresh network namespace (iproute2 ``ip netns``), where only loopback exists.

The network guard sees what drtool's own Python code connects to; a namespace also covers every process a
restore starts (etcdutl, a restored etcd, a kube-apiserver): the source and anything else on the host's
network are not refused but simply absent. The target lab starts inside the namespace with the rehearsal.
The store must be reachable from inside, so this mode suits a local-directory store (the lab and CI case).
Needs root (or CAP_SYS_ADMIN) and iproute2; ``available()`` says whether this machine allows it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence

from drtool.errors import UsageError


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def available() -> str | None:
    """None when namespaces can be made here, else why not (one line)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    if os.geteuid() != 0:
        return "creating a network namespace needs root"
    return None


@contextlib.contextmanager
def namespace() -> Iterator[str]:
    """A new namespace with loopback up; deleted afterwards."""
    why = available()
    if why:
        raise UsageError(f"--netns is not possible here: {why}", "rehearse without --netns (the guard still runs)")
    name = f"drtool-{secrets.token_hex(4)}"
    created = _ip("netns", "add", name)
    if created.returncode != 0:
        why = created.stderr.strip()
        raise UsageError(f"cannot create network namespace {name}: {why}", "rehearse without --netns")
    try:
        up = _ip("-n", name, "link", "set", "lo", "up")
        if up.returncode != 0:
            raise UsageError(f"cannot bring up loopback in {name}: {up.stderr.strip()}", "rehearse without --netns")
        yield name
    finally:
        _ip("netns", "delete", name)


def run_inside(name: str, argv: Sequence[str]) -> int:
    """Run ``argv`` inside namespace ``name`` with this process's environment and terminal; its exit code."""
    return subprocess.run(["ip", "netns", "exec", name, *argv], check=False).returncode
