"""Approval gates: a step marked ``approval: true`` runs only once someone said yes, and that is recorded.

A plan marks the steps whose effect a person must own (changing public DNS, force-restoring a secrets
store). Who can say yes, in the order the executor asks:

1. the command line, before the run: ``--approve STEP`` (repeatable) or ``--approve-all``, for automation;
2. a rehearsal, automatically: it restores into a scratch target, and its report says so;
3. a person at a terminal, asked when the step is reached (default no), while the steps that do not need it
   go on.

When none of them can answer, the step waits, and so does everything that needs it; the rest of the plan
runs, and the run ends with exit code 11 (``ApprovalNeeded``) and the command that continues it. Every
decision names who made it (``--approver`` or the OS user), when, from which host, and how; the catalog keeps
it with the run (``approvals`` table), next to the step's row.

Approvals belong to the plan as it was read: a resume whose plan file no longer has the hash its run
recorded is refused (``require_same_plan``), so a plan edited between "waiting for approval" and the
`--resume ... --approve` that answers it is never run under the earlier run's decisions.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from drtool.errors import UsageError
from drtool.plans.dryrun import PlannedStep
from drtool.plans.schema import Plan, Step
from drtool.repo.manifest import utc_now

if TYPE_CHECKING:
    from drtool.plans.loader import LoadedPlan

BY_FLAG, BY_FLAG_ALL, BY_PROMPT, AUTOMATIC = "--approve", "--approve-all", "prompt", "automatic"


@dataclasses.dataclass(frozen=True)
class Approval:
    """One decision about one gated step of one run."""

    step_id: str
    approved: bool
    approver: str  # --approver, else the OS user
    os_user: str
    host: str
    at: str
    how: str  # --approve | --approve-all | prompt | automatic (rehearsal)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        verdict = "approved" if self.approved else "refused"
        return f"{verdict} by {self.approver} on {self.host} at {self.at} ({self.how})"


@dataclasses.dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked about: the step, its dry run (what it will change), and who waits for it."""

    step: Step
    planned: PlannedStep
    backup_id: str
    waiting: list[str]  # steps that need this one, directly or not


Ask = Callable[[ApprovalRequest], bool]


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container user without a passwd entry
        return f"uid {os.getuid()}"


class Approvals:
    """Who says yes to the gated steps of one run, and how; see the module docstring for the order."""

    def __init__(
        self,
        steps: Iterable[str] = (),
        *,
        every: bool = False,
        approver: str | None = None,
        ask: Ask | None = None,
        automatically: str | None = None,
    ) -> None:
        self.steps = list(dict.fromkeys(steps))
        self.every = every
        self.user = os_user()
        self.approver = approver or self.user
        self.host = socket.gethostname()
        self._ask = ask
        self.automatically = automatically  # e.g. "rehearsal": every gated step approved, and said so
        self._lock = threading.Lock()  # one question at a time

    @classmethod
    def automatic(cls, why: str) -> Approvals:
        return cls(approver="drtool", automatically=why)

    def check(self, plan: Plan) -> None:
        """``--approve`` must name gated steps of this plan: a typo would otherwise leave a gate shut."""
        gated = {s.id for s in plan.steps if s.approval}
        for step_id in self.steps:
            if step_id not in {s.id for s in plan.steps}:
                raise UsageError(f"--approve {step_id}: plan {plan.name} has no such step", _listing(gated))
            if step_id not in gated:
                raise UsageError(f"--approve {step_id}: that step needs no approval", _listing(gated))

    def given(self, step_id: str) -> Approval | None:
        """The approval decided before the run (a flag, or a rehearsal), or None: someone must be asked."""
        if self.automatically:
            return self._decision(step_id, True, f"{AUTOMATIC} ({self.automatically})")
        if self.every:
            return self._decision(step_id, True, BY_FLAG_ALL)
        if step_id in self.steps:
            return self._decision(step_id, True, BY_FLAG)
        return None

    @property
    def can_ask(self) -> bool:
        return self._ask is not None

    def ask(self, request: ApprovalRequest) -> Approval:
        """A person's answer (blocking; the executor asks from its own thread, one question at a time)."""
        assert self._ask is not None
        with self._lock:
            return self._decision(request.step.id, self._ask(request), BY_PROMPT)

    def refusal(self, step_id: str, how: str) -> Approval:
        """A no that nobody typed (the question could not be put): the gate stays shut, and says why."""
        return self._decision(step_id, False, how)

    def _decision(self, step_id: str, approved: bool, how: str) -> Approval:
        return Approval(step_id, approved, self.approver, self.user, self.host, utc_now(), how)


def _listing(gated: set[str]) -> str:
    return f"steps that need approval: {', '.join(sorted(gated))}" if gated else "no step of this plan needs approval"


def require_same_plan(loaded: LoadedPlan, run_id: str, recorded_sha256: str) -> None:
    """A resume continues the plan its run was approved with: an edited plan is a new run, approved again."""
    if loaded.sha256 != recorded_sha256:
        raise UsageError(
            f"plan {loaded.path} changed since run {run_id} started (sha256 {recorded_sha256[:12]} then, "
            f"{loaded.sha256[:12]} now): its approvals do not carry over to an edited plan",
            f"review the change (`drtool restore --plan {loaded.path} --dry-run`), then start a new run with "
            f"`drtool restore --plan {loaded.path}` and approve its gated steps again",
        )
