"""A plan step's own process: `python -m drtool.plans.step_main FD`, started by drtool.plans.step_process.

It reads its ``StepJob`` from stdin, opens the store with the key handed over in it, restores and verifies
the step's plugin, and writes progress, refused connections and the outcome as JSON lines to file
descriptor FD. It dies with drtool: when its stdin closes (drtool ended, however it ended) it kills its own
process group. It leaves with ``os._exit`` so that no thread a plugin left running keeps it alive.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from typing import IO, Any

from drtool import log
from drtool.backends import open_backend
from drtool.crypto.master import MasterKey
from drtool.errors import DrtoolError
from drtool.plans.step_process import FRAME, HANDOVER_SLOT, StepJob
from drtool.plugin.manager import load_one
from drtool.repo.repository import Repository
from drtool.restore import run_restore

PROGRESS_EVERY_S = 0.1  # progress is batched: a restore may advance thousands of times a second


class Channel:
    """JSON lines to drtool, one whole line at a time from any thread."""

    def __init__(self, fd: int) -> None:
        os.set_inheritable(fd, False)  # the plugin's own subprocesses must not hold drtool's pipe open
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview((json.dumps(message, default=str) + "\n").encode())
        with self._lock:
            while data:
                data = data[os.write(self._fd, data) :]


class RelayTask:
    def __init__(self, channel: Channel, task_id: int) -> None:
        self._channel, self._id = channel, task_id
        self._pending, self._sent_at = 0, 0.0
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self._pending += n
            if time.monotonic() - self._sent_at >= PROGRESS_EVERY_S:
                self._flush()

    def done(self) -> None:
        with self._lock:
            self._flush()
        self._channel.send({"done": self._id})

    def _flush(self) -> None:
        if self._pending:
            self._channel.send({"advance": self._id, "by": self._pending})
        self._pending, self._sent_at = 0, time.monotonic()


class RelayProgress:
    """The ``Progress`` a step's restore reports to: each task and advance goes to drtool's live view."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)

    def task(self, description: str, total: int | None = None) -> RelayTask:
        task_id = next(self._ids)
        self._channel.send({"task": task_id, "description": description, "total": total})
        return RelayTask(self._channel, task_id)


def read_job(stream: IO[bytes]) -> StepJob:
    (length,) = FRAME.unpack(stream.read(FRAME.size))
    job = pickle.loads(stream.read(length))
    assert isinstance(job, StepJob)
    return job


def die_with_parent(stream: IO[bytes]) -> None:
    """drtool keeps our stdin open until it is done with us: end of file means it is gone."""
    while stream.read(1):
        pass
    os.killpg(0, signal.SIGKILL)


def restore(job: StepJob, channel: Channel) -> dict[str, Any]:
    key = MasterKey.unwrap(job.one_time_key, job.sealed_key, job.store_config.store_id, HANDOVER_SLOT)
    repo = Repository(open_backend(job.store_url), job.store_config, key, job.slot)

    def report(host: str, port: int | None, why: str) -> None:
        channel.send({"refused": {"host": host, "port": port, "reason": why}})

    guarded = job.guard.active(job.step_id, report) if job.guard else contextlib.nullcontext()
    with guarded:
        outcome = run_restore(
            repo, job.manifest, load_one(job.plugin), job.target, options=job.options, progress=RelayProgress(channel)
        )
    checks = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in outcome.checks]
    recovery_point = outcome.result.details.get("recovery_point")
    return {
        "changed": outcome.result.changed,
        "summary": outcome.result.summary,
        "details": {"recovery_point": str(recovery_point)} if recovery_point else {},
        "checks": checks,
    }


def main() -> None:
    channel = Channel(int(sys.argv[1]))
    job = read_job(sys.stdin.buffer)
    threading.Thread(target=die_with_parent, args=(sys.stdin.buffer,), daemon=True).start()
    log.setup(job.log_level)
    try:
        channel.send({"result": restore(job, channel)})
    except DrtoolError as exc:
        channel.send({"error": exc.one_line()})
    except Exception as exc:  # a plugin bug fails its step, with the traceback in the step's log
        channel.send({"error": f"internal error: {type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
