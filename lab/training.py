"""Running the lab trainer (``drtool_lab.trainer``) as a process, and killing it in the middle of a save.

This is the failure training checkpoints exist for: the job dies while it writes a checkpoint, leaving some
shards and no marker. ``torn_run`` trains with a checkpoint every ``EVERY`` steps, lets the save of step
``TORN_AT`` stop after its second shard, and SIGKILLs the process there, so the source holds complete
checkpoints up to ``TORN_AT - EVERY`` and a torn one at ``TORN_AT``, as a real crash would leave them.
``paused_in_save`` keeps the trainer waiting in that save while a drill stops the checkpoint store under it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from drtool_lab.lab import Lab

from drtool.errors import SourceError

RUN_FOLDER = "mlp"  # the run's folder in the seeded location
EVERY = 10
TORN_AT = 30


@dataclasses.dataclass(frozen=True)
class TornRun:
    folder: str
    saved: tuple[int, ...]  # steps whose checkpoint was written completely
    torn: int  # the step whose save was killed half-way
    killed_at: float  # epoch seconds
    saved_at: dict[int, float]  # step -> epoch seconds its marker was written


def trainer_env(lab: Lab, location: Mapping[str, Any], folder: str) -> dict[str, str]:
    """What a trainer process needs to find its checkpoints (the lab by name, under the lab's own root)."""
    return {
        **os.environ,
        "DRTOOL_LAB_DIR": str(lab.root.parent),
        "DRTOOL_CHECKPOINTS": json.dumps(dict(location)),
        "DRTOOL_CHECKPOINTS_FOLDER": folder,
    }


@contextlib.contextmanager
def paused_in_save(
    lab: Lab,
    location: Mapping[str, Any],
    folder: str = RUN_FOLDER,
    *,
    every: int = EVERY,
    torn_at: int = TORN_AT,
    timeout: float = 120.0,
) -> Iterator[dict[int, float]]:
    """Train in ``location``/``folder`` until the save of step ``torn_at`` is half written; the block runs while
    the trainer waits there (a drill stops the store under it), and the trainer is killed when it ends.
    Yields step -> epoch seconds each complete checkpoint's marker was written."""
    argv = [sys.executable, "-m", "drtool_lab.trainer", "train", "--until", str(torn_at + every)]
    argv += ["--every", str(every), "--pause-in-save", str(torn_at)]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=trainer_env(lab, location, folder),
        start_new_session=True,
    )
    watchdog = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()
    saved_at: dict[int, float] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if "saved" in event:
                saved_at[int(event["saved"])] = float(event["at"])
            if event.get("paused") == torn_at:
                break  # mid-save: shards written, no index
        else:
            raise SourceError(f"the lab trainer ended before step {torn_at}'s save", _stderr(proc))
        watchdog.cancel()
        yield saved_at
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def torn_run(lab: Lab, location: Mapping[str, Any], folder: str = RUN_FOLDER) -> TornRun:
    """Train in ``location``/``folder`` until the save of step ``TORN_AT`` is half written, then kill it."""
    with paused_in_save(lab, location, folder) as saved_at:
        pass
    return TornRun(folder, tuple(sorted(saved_at)), TORN_AT, time.time(), saved_at)


def _stderr(proc: subprocess.Popen[str]) -> str:
    proc.wait()
    text = proc.stderr.read() if proc.stderr else ""
    return " | ".join(text.strip().splitlines()[-2:]) or f"exit code {proc.returncode}"
