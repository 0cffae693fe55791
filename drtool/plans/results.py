"""What a plan run knows about itself while it runs and after: each step's state, and the run's.

The executor writes these, the live view and `drtool runs show` read them (the catalog holds the same rows),
and reports are made from ``to_dict``. A step's status moves through:

    waiting -> [awaiting-approval ->] running -> ok | failed | refused
    waiting -> skipped (optional and absent, done in the run being resumed, or a step it needs did not end ok)
    awaiting-approval -> declined (a person said no) | stays awaiting-approval (nobody could be asked)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from drtool.plans.schema import Plan
from drtool.plugin.contract import Check

if TYPE_CHECKING:
    from drtool.plans.approval import Approval

WAITING, RUNNING, AWAITING_APPROVAL = "waiting", "running", "awaiting-approval"
OK, FAILED, REFUSED, SKIPPED, DECLINED = "ok", "failed", "refused", "skipped", "declined"
BLOCKED = "blocked"  # during the run only: a step it needs did not end ok; reported as skipped with the reason
NOT_DONE = {FAILED: "failed", REFUSED: "failed", BLOCKED: "was not run", AWAITING_APPROVAL: "awaits approval",
            DECLINED: "was not approved"}  # fmt: skip  # a step needing one of these does not run, and why
GATED = (AWAITING_APPROVAL, DECLINED)


@dataclasses.dataclass
class StepResult:
    id: str
    uses: str
    needs: list[str]
    status: str = WAITING
    started_s: float = 0.0
    finished_s: float = 0.0
    attempts: int = 0
    changed: bool = False
    summary: str = ""
    error: str = ""
    done_in: str = ""  # the run in which the step ended ok (an earlier one when a resume took it over)
    checks: list[Check] = dataclasses.field(default_factory=list)
    verification: str = ""  # once the step's verify ran: passed, failed or none (drtool.plugin.contract)
    log: list[str] = dataclasses.field(default_factory=list)
    refused_connections: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    recovery_point: str = ""  # source time of the restored state, when the plugin reports it (a PITR)
    approval: Approval | None = None
    progress_done: int = 0  # what the step's restore reported so far (bytes, objects): for the live view only
    progress_total: int | None = None

    @property
    def seconds(self) -> float:
        return self.finished_s - self.started_s

    def to_dict(self) -> dict[str, Any]:
        """The shape reports read (docs/rehearsal.md): no logs or live progress, checks as plain dicts."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for live in ("log", "progress_done", "progress_total"):
            out.pop(live)
        out["checks"] = [dataclasses.asdict(c) for c in self.checks]
        out["approval"] = self.approval.to_dict() if self.approval else None
        return out


@dataclasses.dataclass
class RunResult:
    run_id: str
    plan: Plan
    backup_id: str
    started: str
    finished: str = ""
    seconds: float = 0.0
    steps: dict[str, StepResult] = dataclasses.field(default_factory=dict)
    checks: list[Check] = dataclasses.field(default_factory=list)  # the plan's own, after every step
    resumed_from: str = ""
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)  # plugin -> why the caller left it out
    checks_left_out: dict[str, str] = dataclasses.field(default_factory=dict)  # check id -> why it did not run

    @property
    def ok(self) -> bool:
        steps_ok = all(s.status in (OK, SKIPPED) for s in self.steps.values())
        return steps_ok and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[StepResult]:
        return [s for s in self.steps.values() if s.status in (FAILED, REFUSED)]

    @property
    def gated(self) -> list[StepResult]:
        """Steps that did not run for want of an approval (nobody was asked, or a person said no)."""
        return [s for s in self.steps.values() if s.status in GATED]

    @property
    def status(self) -> str:
        """What the catalog records of a finished run: ok, failed, or awaiting-approval."""
        if self.ok:
            return OK
        return AWAITING_APPROVAL if self.gated and not self.failed else FAILED

    def resume_command(self) -> str:
        """The exact command that continues this run, approving what it stopped at."""
        approve = "".join(f" --approve {s.id}" for s in self.gated)
        return f"drtool restore --resume {self.run_id}{approve}"
