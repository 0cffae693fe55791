"""A rehearsal's two recovery times, and the training it cost.

**Restore steps done** is when the last step ended. **Time to service** is when every check of the plan was
green: the platform checks are the restored platform's controllers acting on what was restored (Kueue
admitting, Deployments Available, certificates Ready, the collector leaving objects alone, training
resumed), so it includes the first queued workload admitted and running. That is the RTO compared with
the plan's objective: counting only the restore's own steps would underestimate it. Checks that watch for
a while (``no-reissue``, ``gc-stable``) are green when their condition first held; their windows end at
``confirmed_s``. All times are seconds from the moment the source became unreachable.

A ``training-resumes`` check adds the training recovery point: the step a job resumed from, the steps
that had to be redone (at least up to the newest checkpoint the source began), and the wall time of
training lost: the failure time minus when that checkpoint was written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from drtool.plans.executor import RunResult
from drtool.plans.platform.context import TimedCheck


def _green(check: Any) -> float | None:
    timed = isinstance(check, TimedCheck) and not check.facts.get("skipped")
    return check.green_s if timed else None


def recovery_times(run: RunResult, offset_s: float, confirmed_s: float) -> dict[str, float | None]:
    """``restored_s``, ``service_s`` (None unless the run is ok), ``first_workload_s``, ``confirmed_s``."""
    ran = [s.finished_s for s in run.steps.values() if s.attempts]
    restored = offset_s + max(ran, default=0.0)
    greens = [g for g in map(_green, run.checks) if g is not None]
    service = offset_s + max([restored - offset_s, *greens]) if run.ok else None
    workloads = [
        c.started_s + float(c.facts["running_s"])
        for c in run.checks
        if isinstance(c, TimedCheck) and c.ok and "running_s" in c.facts
    ]
    return {
        "restored_s": round(restored, 3),
        "service_s": round(service, 3) if service is not None else None,
        "first_workload_s": round(offset_s + min(workloads), 3) if workloads else None,
        "confirmed_s": round(confirmed_s, 3),
    }


def training_points(run: RunResult, failure_time: dt.datetime) -> list[dict[str, Any]]:
    """The recovery point of each training run a ``training-resumes`` check resumed."""
    points = []
    for check in run.checks:
        facts: Mapping[str, Any] = getattr(check, "facts", {}) or {}
        if "recovery_step" not in facts:
            continue
        written = facts.get("checkpoint_written_at")
        lost = None
        if written:
            written_at = dt.datetime.fromisoformat(str(written).replace("Z", "+00:00"))
            lost = round((failure_time - written_at).total_seconds(), 3)
        points.append({"check": check.name, **facts, "wall_time_lost_s": lost})
    return points
