"""The machine-wide lock for a port a lab server cannot move (Velero's :8080), with real processes.

The holder is a real detached process started as the lab starts its servers (``process.spawn`` with the lock's
file passed in); nothing here starts a server. Each test locks a port number of its own under its own temp
dir, so a real Velero on this machine is never waited for nor disturbed.
"""

from __future__ import annotations

import io
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from drtool_lab.components import port_lock

from drtool.errors import SourceError
from drtool.servers import process

PORT = 18080


@pytest.fixture(autouse=True)
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[int]:
    """A process that took the lock and was handed it, as a lab's Velero server is; the starter let go."""
    with port_lock.held(PORT, "first", timeout=5) as lock:
        pid = process.spawn(["sleep", "600"], tmp_path / "sleep.log", pass_fds=(lock.fd,))
        lock.record(f"sleep pid {pid}")
    try:
        yield pid
    finally:
        process.stop(pid)


def test_the_server_keeps_the_lock_after_its_starter_let_go_and_a_second_one_gives_up_naming_it(holder: int) -> None:
    out = io.StringIO()
    with pytest.raises(SourceError) as refused, port_lock.held(PORT, "second", timeout=1.0, every=0.2, out=out):
        pytest.fail("the lock was taken while its holder runs")
    assert f"still held by sleep pid {holder}" in str(refused.value)
    assert f"second: waiting for port {PORT} (one per machine), held by sleep pid {holder}" in out.getvalue()


def test_a_second_one_waits_and_gets_the_lock_once_the_holder_exits(holder: int) -> None:
    out, got = io.StringIO(), threading.Event()

    def second() -> None:
        with port_lock.held(PORT, "second", timeout=60, every=0.2, out=out):
            got.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    process.wait_until(lambda: "waiting for port" in out.getvalue(), 30, "the second one waiting")
    assert not got.is_set()
    process.stop(holder)  # as `drtool lab down`: the kernel drops the lock with the process
    waiter.join(60)
    assert got.is_set(), out.getvalue()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    with port_lock.held(PORT, "first", timeout=5) as lock:
        pid = process.spawn(["sleep", "600"], tmp_path / "sleep.log", pass_fds=(lock.fd,))
    process.stop(pid, timeout=0)  # SIGKILL at once: no chance to clean up
    with port_lock.held(PORT, "second", timeout=5) as lock:
        assert "second starting (lab process" in port_lock.holder(PORT)
