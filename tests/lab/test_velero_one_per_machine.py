"""Two labs' Velero started at once on one machine: the second waits for the first instead of failing.

Velero v1.18.3 binds :8080 on every address whatever it is told (lab/components/velero.py), so two test runs
or a bench next to a test used to fail the second start with "address already in use". Two bare labs (etcd,
kube-apiserver, MinIO) each start their Velero in a thread at the same moment; one runs, the other prints
that it waits for the port naming the holder, and starts, its location Available, once the first is stopped.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from drtool_lab.components import port_lock
from drtool_lab.components.velero import MANAGER_METRICS_PORT, VeleroServer
from drtool_lab.lab import Lab

from drtool.servers import process


def test_a_second_velero_waits_for_the_port_and_runs_once_the_first_stops(
    lab_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labs = [Lab(f"velero-{n}", root=lab_root) for n in (1, 2)]
    errors: list[BaseException] = []

    def start(lab: Lab) -> None:
        try:
            lab.up(["velero"])
        except BaseException as exc:
            errors.append(exc)

    try:
        for lab in labs:
            lab.up(["etcd", "kube-apiserver", "minio"])
        threads = [threading.Thread(target=start, args=(lab,)) for lab in labs]
        for thread in threads:
            thread.start()

        def one_running() -> bool:
            return any(_running(lab) and _velero(lab).location_available() for lab in labs)

        process.wait_until(lambda: bool(errors) or one_running(), 300, "one lab's Velero")
        assert not errors, errors
        first = next(lab for lab in labs if _running(lab))
        second = next(lab for lab in labs if lab is not first)
        process.wait_until(lambda: "waiting for port" in capsys.readouterr().err, 60, "the second Velero waiting")
        assert not _running(second)
        _velero(first).stop()
        for thread in threads:
            thread.join(300)
        assert not errors, errors
        assert _velero(second).running() and _velero(second).location_available()
        assert f"velero server pid {_velero(second).pid}" in port_lock.holder(MANAGER_METRICS_PORT)
    finally:
        for lab in labs:
            lab.down()


def _velero(lab: Lab) -> VeleroServer:
    velero = lab.components["velero"]
    assert isinstance(velero, VeleroServer)
    return velero


def _running(lab: Lab) -> bool:
    return "velero" in lab.components and _velero(lab).running()
