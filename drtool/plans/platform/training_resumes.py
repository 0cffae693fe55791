"""`training-resumes`: a restored training run continues where it should. A pod that restarts is not a
recovered job: the job must resume from the last COMPLETE checkpoint (never a torn one, never step 0),
with its parameters exactly as saved, and then train as if nothing had happened.

The backup says which step that is: the checkpoints step's artifacts name each complete checkpoint with its
step and when its marker was written, and the checkpoints it skipped (torn ones) with why. Then the
trainer is run twice, as processes, with the protocol of docs/plans.md: ``COMMAND resume --steps K
--report FILE`` against the restored location (``DRTOOL_CHECKPOINTS``, ``DRTOOL_CHECKPOINTS_FOLDER``,
``DRTOOL_CHECKPOINTS_URL``), and ``COMMAND reference --until S+K --digest-at S --report FILE``, an
uninterrupted run from scratch. Pass only when the resumed run started at step S, the digest of the
parameters it loaded equals the reference's at S, and its K losses equal the reference's bit for bit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.durations import format_duration
from drtool.plans.platform.context import CheckContext, Verdict, Watch
from drtool.plans.schema import TrainingResumesCheck
from drtool.repo.manifest import Manifest

_TRAILING_NUMBER = re.compile(r"(\d+)$")


@dataclasses.dataclass(frozen=True)
class RecoveryPoint:
    """What the backup knows about one run folder's checkpoints."""

    step: int  # the newest complete checkpoint's step: where a resume must start
    written_at: float | None  # epoch seconds its last object (its marker) was written at the source
    complete: tuple[int, ...]
    torn: tuple[int, ...]  # steps of checkpoints the backup skipped as incomplete

    @property
    def steps_lost_at_least(self) -> int:
        """The source had reached at least the newest step it began to save; everything after S is redone."""
        return max((*self.torn, self.step)) - self.step


def _in_folder(meta: Mapping[str, Any], folder: str) -> bool:
    parent = posixpath.dirname(str(meta.get("checkpoint") or ""))
    return folder.strip("/") in (parent, f"{meta.get('source')}/{parent}")  # one source, or several


def recovery_point(manifest: Manifest, plugin: str, folder: str) -> RecoveryPoint | None:
    """The newest complete checkpoint of ``folder`` in the backup (docs/checkpoints.md: artifact meta
    ``checkpoint``, ``step``, ``mtime``; plugin meta ``skipped``), or None when it holds none."""
    written: dict[int, float] = {}
    for art in manifest.artifacts_of(plugin):
        if _in_folder(art.meta, folder) and isinstance(art.meta.get("step"), int):
            step = art.meta["step"]
            written[step] = max(written.get(step, 0.0), float(art.meta.get("mtime") or 0.0))
    if not written:
        return None
    outcome = manifest.plugins.get(plugin)
    skipped = (outcome.meta.get("skipped") if outcome else None) or []
    torn = []
    for entry in skipped:
        number = _TRAILING_NUMBER.search(posixpath.basename(str(entry.get("checkpoint") or "")))
        if _in_folder(entry, folder) and number:
            torn.append(int(number.group(1)))
    step = max(written)
    return RecoveryPoint(step, written[step] or None, tuple(sorted(written)), tuple(sorted(torn)))


def _argv(command: list[str]) -> list[str]:
    """``python`` is the interpreter drtool runs under, so a trainer installed beside drtool is found."""
    return [sys.executable, *command[1:]] if command[0] == "python" else list(command)


def _trainer(check: TrainingResumesCheck, env: Mapping[str, str], args: list[str], timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drtool-training-") as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run(
            [*_argv(check.command), *args, "--report", str(report)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=max(timeout, 1.0),
        )
        if proc.returncode != 0 or not report.exists():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
            raise RuntimeError(f"trainer {args[0]} exited {proc.returncode}: {tail}")
        return json.loads(report.read_text())


def trainer_env(ctx: CheckContext, check: TrainingResumesCheck) -> dict[str, str]:
    """Where the restored checkpoints are: the checkpoints step's target, and the run's folder in it."""
    target = ctx.target(check.step)
    root = str(target.get("url") or target.get("path") or "").rstrip("/")
    return {
        "DRTOOL_CHECKPOINTS": json.dumps(target),
        "DRTOOL_CHECKPOINTS_FOLDER": check.folder.strip("/"),
        "DRTOOL_CHECKPOINTS_URL": f"{root}/{check.folder.strip('/')}",
    }


def run(check: TrainingResumesCheck, ctx: CheckContext, watch: Watch) -> Verdict:
    if ctx.manifest is None:
        return Verdict(False, "no backup to compare with (the check runs after a plan's restore)")
    plugin = ctx.plan.step(check.step).uses
    point = recovery_point(ctx.manifest, plugin, check.folder)
    if point is None:
        return Verdict(False, f"the backup holds no complete checkpoint under {check.folder}: nothing to resume from")
    facts: dict[str, Any] = {
        "folder": check.folder,
        "recovery_step": point.step,
        "complete_steps": list(point.complete),
        "torn_steps": list(point.torn),
        "steps_lost_at_least": point.steps_lost_at_least,
        "checkpoint_written_at": _iso(point.written_at),
    }
    deadline = time.monotonic() + check.timeout.total_seconds()
    resume = ["resume", "--steps", str(check.steps)]
    resumed = _trainer(check, trainer_env(ctx, check), resume, check.timeout.total_seconds())
    until = point.step + check.steps
    reference = _trainer(
        check, {}, ["reference", "--until", str(until), "--digest-at", str(point.step)], deadline - time.monotonic()
    )
    facts["resumed_from_step"] = resumed.get("resumed_from_step")
    failure = compare(point, resumed, reference)
    if failure:
        return Verdict(False, failure, facts)
    watch.green()
    torn = f"; step {', '.join(map(str, point.torn))} torn and not used" if point.torn else ""
    return Verdict(
        True,
        f"resumed from step {point.step}, the last complete checkpoint{torn}; parameters equal bit for bit to "
        f"those saved at step {point.step}; the next {check.steps} losses equal an uninterrupted run's "
        f"({format_duration(watch.clock() - watch.started_s)})",
        facts,
    )


def compare(point: RecoveryPoint, resumed: Mapping[str, Any], reference: Mapping[str, Any]) -> str | None:
    """Why the resumed run is not the uninterrupted one continued from ``point``, or None."""
    started = resumed.get("resumed_from_step")
    if started != point.step:
        what = " (the torn checkpoint)" if started in point.torn else " (from scratch)" if started == 0 else ""
        return f"resumed from step {started}{what}, but the last complete checkpoint is step {point.step}"
    if resumed.get("params_sha256") != reference.get("params_sha256"):
        return f"the parameters loaded at step {point.step} differ from an uninterrupted run's at that step"
    for step, loss in (resumed.get("losses") or {}).items():
        want = (reference.get("losses") or {}).get(step)
        if loss != want:
            return f"loss at step {step} is {_float(loss)}, an uninterrupted run's is {_float(want)}"
    if not resumed.get("losses"):
        return "the resumed run reported no losses"
    return None


def _float(value: Any) -> str:
    try:
        return repr(float.fromhex(str(value)))
    except ValueError:
        return repr(value)


def _iso(epoch: float | None) -> str | None:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if epoch else None
