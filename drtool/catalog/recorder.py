"""Writing what happens on this side to the catalog as it happens: restore runs, their steps, and drills.

A run's row is written when it starts and its step rows whenever a step changes state (waiting, awaiting
approval, running, its end), so a crash or Ctrl-C loses nothing, `drtool runs show RUN` follows a run from
another terminal, and `drtool restore --resume RUN` reads from here which steps ended ``ok`` and in which run
(``StepRunRow.done_in``). Approvals are rows of their own. The recorder knows rows, not plans: anything
shaped like ``StepRecord`` is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from drtool.catalog.db import Catalog
from drtool.catalog.runs import ApprovalRow, DrillRow, RestoreRunRow, RunLog, StepRunRow


class RunRecord(Protocol):
    """What is recorded of a run itself (``drtool.plans.executor.RunResult`` is one)."""

    run_id: str
    backup_id: str
    started: str
    resumed_from: str

    @property
    def plan(self) -> Any: ...  # anything with a ``name``


class StepRecord(Protocol):
    """What is recorded of one step (``drtool.plans.executor.StepResult`` is one)."""

    id: str
    uses: str
    status: str
    attempts: int
    started_s: float
    finished_s: float
    changed: bool
    summary: str
    error: str
    log: list[str]
    done_in: str


class RunRecorder:
    """Keeps one run's rows in the catalog up to date, from its first moment."""

    def __init__(
        self,
        catalog: Catalog,
        run: RunRecord,
        *,
        kind: str,
        plan_path: str,
        plan_sha256: str,
        values_path: str,
        store_id: str,
    ) -> None:
        self.log = RunLog(catalog)
        self.run = RestoreRunRow(
            id=run.run_id,
            kind=kind,
            plan_name=run.plan.name,
            plan_path=plan_path,
            plan_sha256=plan_sha256,
            values_path=values_path,
            store_id=store_id,
            backup_id=run.backup_id,
            started=run.started,
            resumed_from=run.resumed_from,
        )
        self.log.save(self.run)

    def steps(self, steps: Iterable[StepRecord]) -> None:
        """The rows of every step, as they are now."""
        self.log.replace_steps(self.run.id, [_step_row(self.run.id, s) for s in steps])

    def approval(self, decision: Mapping[str, Any]) -> None:
        """One decision about a gated step: ``drtool.plans.approval.Approval.to_dict()``."""
        self.log.save(ApprovalRow(run_id=self.run.id, **decision))

    def finish(self, steps: Iterable[StepRecord], finished: str, status: str) -> None:
        """The last word on the run: ok, failed, or awaiting-approval."""
        self.steps(steps)
        self.run.finished = finished
        self.run.status = status
        self.log.save(self.run)


def _step_row(run_id: str, s: StepRecord) -> StepRunRow:
    return StepRunRow(
        run_id=run_id,
        step_id=s.id,
        uses=s.uses,
        status=s.status,
        attempts=s.attempts,
        started_s=s.started_s,
        finished_s=s.finished_s,
        changed=s.changed,
        summary=s.summary,
        error=s.error,
        log="\n".join(s.log),
        done_in=s.done_in,
    )


def record_drill(catalog: Catalog, report: Mapping[str, Any], paths: Mapping[str, Path], ok: bool) -> None:
    """One rehearsal in the drill history (`drtool drills`), from its report (docs/rehearsal.md)."""
    run = report["run"]
    independence = report.get("independence") or {}
    RunLog(catalog).save(
        DrillRow(
            id=run["id"],
            started=run["started"],
            plan_name=report["plan"]["name"],
            backup_id=report["backup"]["id"],
            target=run["target"],
            ok=ok,
            rto_s=run["rto"]["measured_s"],
            rto_objective_s=run["rto"]["objective_s"],
            rto_met=run["rto"]["met"],
            rpo_s=run["rpo"]["measured_s"],
            rpo_objective_s=run["rpo"]["objective_s"],
            rpo_met=run["rpo"]["met"],
            independence=str(independence.get("verdict", "not analysed")),
            refused_connections=sum(len(s["refused_connections"]) for s in run["steps"])
            + len(run["refused_outside_steps"]),
            report=str(paths["html"]),
        )
    )
