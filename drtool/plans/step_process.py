"""One attempt of a plan step in a process of its own, so that a timeout stops the step for real.

A thread cannot be killed: a timed-out step used to keep writing into the target while a retry or a resume
started the same step again. Each attempt now runs in a child (``python -m drtool.plans.step_main``) that
leads a process group of its own; whatever the plugin starts there (etcdutl, git, helm, its threads) is in
that group. When the attempt ends — done, failed or timed out — the whole group is killed with SIGKILL and
the executor waits until no process of it is left before it retries, records the step, or lets a resume
begin. A server a plugin starts on purpose to outlive the step (a restored etcd member) detaches into its
own session (``start_new_session``, as the lab's servers do) and is not the step's to kill. If drtool
itself dies, the child sees its stdin close and kills its own group.

What crosses the boundary (``StepJob``, pickled into the child's stdin, never argv or environment): the
step's plugin name, target and options, the resolved ``Manifest`` by value (the child never reads it from
the store again), the store's URL and config, and the unlocked master key — wrapped under a one-time key
(``MasterKey.wrap``, its only exit) that travels alongside. drtool's own credential variables are removed
from the child's environment (it cannot and need not unlock the store itself); a plugin's ``*_env``
references stay. A rehearsal's network guard is pickled in too, and refuses in the child what it would have refused
in drtool's process. What comes back, as JSON lines on a pipe of its own: progress, refused connections,
and the outcome. The child's stdout and stderr (logs) are passed on to drtool's stderr, prefixed with the
step id; their last lines join the step's log when the process dies without an outcome.

Cost: one Python start-up, the imports of drtool and of the one plugin, and the manifest's pickle, per
attempt (bench/step_process.py measures it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pickle
import secrets
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from drtool.crypto.slots import KeySlot
from drtool.environ import CREDENTIAL_ENV
from drtool.plugin.contract import Check, RestoreResult
from drtool.repo.chains import PointPlan
from drtool.repo.config import StoreConfig
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository

HANDOVER_SLOT = "step-process"  # the name the master key is wrapped under for a child (never stored)
FRAME = struct.Struct(">Q")  # the job's length, before its pickle on the child's stdin
OUTPUT_TAIL = 20  # lines of the child's output kept for a step log when it dies without an outcome
GONE_WAIT_S = 10.0  # how long to wait for a killed group's last process to disappear

Report = Callable[[str, "int | None", str], None]  # (host, port, why): a connection the guard refused


class StepGuard(Protocol):
    """A network guard a step's process installs (pickled into it; e.g. drtool.rehearsal.guard)."""

    def active(self, step_id: str, report: Report) -> contextlib.AbstractContextManager[None]: ...


@dataclasses.dataclass
class StepJob:
    """Everything one attempt needs, handed to the child through its stdin (see the module docstring)."""

    step_id: str
    plugin: str
    manifest: Manifest | PointPlan  # the backup, or the point of a delta chain a step restores
    target: dict[str, Any]
    options: dict[str, Any]
    store_url: str
    store_config: StoreConfig
    slot: KeySlot | None
    sealed_key: bytes
    one_time_key: bytes
    guard: StepGuard | None = None
    log_level: str | None = None

    @classmethod
    def of(
        cls,
        repo: Repository,
        manifest: Manifest | PointPlan,
        step_id: str,
        plugin: str,
        target: dict[str, Any],
        options: dict[str, Any],
        guard: StepGuard | None = None,
    ) -> StepJob:
        one_time_key = secrets.token_bytes(32)
        return cls(
            step_id,
            plugin,
            manifest,
            target,
            options,
            repo.backend.url,
            repo.config,
            repo.unlocked_with,
            repo.key.wrap(one_time_key, HANDOVER_SLOT),
            one_time_key,
            guard,
            _drtool_log_level(),
        )


@dataclasses.dataclass
class AttemptOutcome:
    """How one attempt ended: an outcome, an error, or a timeout (then ``error`` is None, ``timed_out``)."""

    pid: int
    result: RestoreResult | None = None
    checks: list[Check] = dataclasses.field(default_factory=list)
    error: str | None = None
    traceback: str = ""
    timed_out: bool = False
    output_tail: list[str] = dataclasses.field(default_factory=list)
    survivors: list[int] = dataclasses.field(default_factory=list)  # processes of its group still there


Event = dict[str, Any]  # progress ({task|advance|done}) or {refused: {host, port, reason}}


def run_attempt(job: StepJob, timeout_s: float | None, on_event: Callable[[Event], None]) -> AttemptOutcome:
    """Run ``job`` in a child process group; when it ends (or ``timeout_s`` passes) kill the group and wait."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "drtool.plans.step_main", str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,  # its own process group, which stop_group kills whole
            env=child_environment(),
        )
    finally:
        os.close(write_fd)
    outcome = AttemptOutcome(proc.pid)
    readers = [
        _thread(_read_events, read_fd, on_event, outcome),
        _thread(_pass_output, proc.stdout, job.step_id, outcome),
    ]
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a child that died at once: its exit code says why
            data = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.write(FRAME.pack(len(data)) + data)
            proc.stdin.flush()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
    finally:
        outcome.survivors = stop_group(proc.pid)
        proc.wait()
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        for reader in readers:
            reader.join(1.0)
    if not outcome.timed_out and outcome.result is None and outcome.error is None:
        outcome.error = f"step process exited with code {proc.returncode} before reporting an outcome"
    return outcome


def stop_group(pgid: int) -> list[int]:
    """SIGKILL every process of group ``pgid``; return once none is left (or those left after a while)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + GONE_WAIT_S
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def group_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies have stopped: only their exit status is left)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def child_environment() -> dict[str, str]:
    """drtool's environment without its credential variables: the key reaches the child through its stdin."""
    return {k: v for k, v in os.environ.items() if k not in CREDENTIAL_ENV}


def _drtool_log_level() -> str | None:
    """The level `--log-level` set in this process, for the child (``DRTOOL_LOG_LEVEL`` it inherits)."""
    level = logging.getLogger("drtool").level
    return logging.getLevelName(level) if level != logging.NOTSET else None


def _thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _read_events(fd: int, on_event: Callable[[Event], None], outcome: AttemptOutcome) -> None:
    with os.fdopen(fd, "rb") as stream:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "result" in message:
                done = message["result"]
                outcome.result = RestoreResult(bool(done["changed"]), str(done["summary"]), done.get("details") or {})
                outcome.checks = [Check(c["name"], bool(c["ok"]), c.get("detail", "")) for c in done["checks"]]
            elif "error" in message:
                outcome.error, outcome.traceback = str(message["error"]), str(message.get("traceback") or "")
            else:
                on_event(message)


def _pass_output(stream: IO[bytes], step_id: str, outcome: AttemptOutcome) -> None:
    """The child's logs go where drtool's own go (stderr), one line at a time, labelled with the step."""
    tail: deque[str] = deque(maxlen=OUTPUT_TAIL)
    for raw in _lines(stream):
        line = raw.decode(errors="replace").rstrip("\n")
        tail.append(line)
        outcome.output_tail = list(tail)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"[{step_id}] {line}\n")


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    with stream:
        yield from stream
