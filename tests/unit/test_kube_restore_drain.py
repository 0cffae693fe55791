"""The restore's worker pool (``drtool.kube.restore._drain``): every object is applied once, at most the
slots' number in flight, and a worker's unexpected error (a lost connection) stops the restore with that
error once the objects in flight are done, without submitting the rest."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from threading import BoundedSemaphore

import pytest

from drtool.errors import SourceError
from drtool.kube.restore import _drain


def test_every_item_runs_once_within_the_slots() -> None:
    seen: list[int] = []
    running, most = [0], [0]
    lock = threading.Lock()

    def fn(_t: object, rec: dict) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        seen.append(rec["i"])
        with lock:
            running[0] -= 1

    with ThreadPoolExecutor(8) as pool:
        _drain(pool, BoundedSemaphore(3), ((None, {"i": i}) for i in range(2_000)), fn)  # type: ignore[misc]
    assert sorted(seen) == list(range(2_000)) and most[0] <= 3


def test_a_worker_error_stops_the_restore() -> None:
    started: list[int] = []

    def fn(_t: object, rec: dict) -> None:
        started.append(rec["i"])
        if rec["i"] == 5:
            raise SourceError("kubernetes API unreachable")

    with ThreadPoolExecutor(4) as pool, pytest.raises(SourceError, match="unreachable"):
        _drain(pool, BoundedSemaphore(1), ((None, {"i": i}) for i in range(1_000)), fn)  # type: ignore[misc]
    # one slot: the failure is recorded before its slot is free, so at most one more item is submitted
    assert 5 in started and set(started) <= set(range(7))
