"""Running a plan: steps in dependency order, independent ones in parallel, each gated, timed, retried, logged.

A step is one plugin's restore of the chosen backup followed by that plugin's verify, run in a process of
its own (step_process.py) so that a timeout kills it — its whole process group — before a retry, or a
resume, starts the step again. Steps whose needs are all met run at once, at most ``plan.parallelism``
together. A step marked ``approval: true`` first passes its gate (approval.py): approved before the run,
asked at a terminal while the other steps go on, or left waiting. A failed, refused or unapproved step stops
only what needs it; the rest of the plan still runs, so one resume finishes the job. Every step's state is
written to the catalog as it changes (``drtool.catalog.recorder``), so a crash or Ctrl-C loses nothing and
`drtool runs show` follows a run from another terminal: `drtool restore --resume RUN` re-runs the steps
that did not end ``ok`` (each step's row records the run it was done in), which is safe because plugin
restores are idempotent. The backup is a ``Manifest`` resolved once by the caller and passed on, by value,
to every step's process.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from drtool.durations import format_duration
from drtool.errors import DrtoolError, NotFound, UsageError
from drtool.plans import results as st
from drtool.plans.approval import Approval, ApprovalRequest, Approvals
from drtool.plans.checks import checks_left_out, run_checks
from drtool.plans.dag import downstream
from drtool.plans.dryrun import planned_step, unresolved, wave_of
from drtool.plans.loader import LoadedPlan
from drtool.plans.results import RunResult, StepResult
from drtool.plans.schema import Step
from drtool.plans.step_process import StepGuard, StepJob, run_attempt
from drtool.plans.steps import skip_reason, step_target
from drtool.plans.validate import ensure_valid
from drtool.plugin.contract import NO_CHECKS, VERDICT_TEXT, verification
from drtool.plugin.manager import load_plugins
from drtool.progress import Progress, Task
from drtool.repo.chains import ChainReader
from drtool.repo.manifest import Manifest, utc_now
from drtool.repo.repository import Repository

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog
    from drtool.catalog.recorder import RunRecorder

RETRY_PAUSE_S = 1.0
Echo = Callable[[str], None]
Event = tuple[str, str, Approval | None]  # ("done" | "answer", step id, the answer)


class StepWatcher(Protocol):
    """Told when steps start and end (the rehearsal's network guard attributes connections with it)."""

    def step_started(self, step_id: str) -> None: ...

    def step_finished(self, step_id: str) -> list[dict[str, Any]]:
        """Connections refused while the step ran (each a dict with at least ``address``)."""
        ...

    def for_step_processes(self) -> StepGuard:
        """The guard each step's process installs (pickled into it)."""
        ...

    def refused_in_step(self, step_id: str, host: str, port: int | None, reason: str) -> None:
        """A connection the guard in ``step_id``'s process refused."""
        ...


class RunNotifier(Protocol):
    """Told of the moments a person should hear about (drtool.plans.notify.Webhook)."""

    def event(self, name: str, run: RunResult, step: StepResult | None, rto_so_far_s: float) -> None: ...


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


def _recorder(
    catalog: Catalog | None, run: RunResult, loaded: LoadedPlan, kind: str, values: str, store_id: str
) -> RunRecorder | None:
    """The catalog rows of ``run``, written as it goes (None without a catalog; SQLAlchemy loads only then)."""
    if catalog is None:
        return None
    from drtool.catalog.recorder import RunRecorder

    path, sha = str(loaded.path.resolve()), loaded.sha256
    return RunRecorder(catalog, run, kind=kind, plan_path=path, plan_sha256=sha, values_path=values, store_id=store_id)


class Executor:
    """Runs one plan against one backup; see the module docstring for the rules."""

    def __init__(
        self,
        loaded: LoadedPlan,
        repo: Repository,
        manifest: Manifest,
        *,
        read: Sequence[Manifest] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        catalog: Catalog | None = None,
        kind: str = "restore",
        values_path: Path | None = None,
        done_before: Mapping[str, str] | None = None,  # step id -> run id where it already ended ok
        resumed_from: str = "",
        approvals: Approvals | None = None,  # default: nobody can approve, gated steps wait
        watcher: StepWatcher | None = None,
        notifier: RunNotifier | None = None,
        elapsed_before_s: float = 0.0,  # RTO spent before this run: since the start of the run it resumes
        echo: Echo = lambda _line: None,
        progress: Progress | None = None,
        left_out: Mapping[str, str] | None = None,  # plugin -> why: its steps are skipped, never failed
    ) -> None:
        self.plan = ensure_valid(loaded)
        self.repo = repo
        self.manifest = manifest
        self.overrides = overrides or {}
        self.done_before = dict(done_before or {})
        self.approvals = approvals or Approvals()
        self.approvals.check(self.plan)
        self.watcher = watcher
        self.notifier = notifier
        self.elapsed_before_s = elapsed_before_s
        self.echo = echo
        self.progress = progress
        self.run = RunResult(new_run_id(), self.plan, manifest.id, utc_now(), resumed_from=resumed_from)
        self.run.left_out = dict(left_out or {})
        self.run.steps = {s.id: StepResult(s.id, s.uses, list(s.needs)) for s in self.plan.steps}
        self.recorder = _recorder(catalog, self.run, loaded, kind, str(values_path or ""), repo.config.store_id)
        self._t0 = time.monotonic()
        self._started: set[str] = set()  # steps the watcher was told about
        self._events: queue.Queue[Event] = queue.Queue()
        # steps restoring a point (`with: {at: ...}`) find it here; ``read``: the manifests the caller read
        # while choosing ``manifest`` (``find_backup(..., read=...)``), which are then not read again
        self._chains = ChainReader(repo, [manifest, *read])

    def now(self) -> float:
        return time.monotonic() - self._t0

    def execute(self) -> RunResult:
        """Run every step that can run; the result says which failed or wait (nothing is raised for those)."""
        plan, steps = self.plan, self.run.steps
        waiting = [s.id for s in plan.steps]
        ready: list[str] = []  # needs met, gate passed: waiting for a free slot
        running: set[str] = set()
        asking: set[str] = set()  # a person is being asked
        self.echo(f"run {self.run.run_id}: plan {plan.name}, backup {self.run.backup_id}")
        self._record()
        self._notify("run.started")
        while waiting or ready or running or asking:
            progressed = self._settle(waiting, ready, asking)
            while ready and len(running) < plan.parallelism:
                step_id = ready.pop(0)
                running.add(step_id)
                self._start(plan.step(step_id), steps[step_id])
            if not (running or asking):
                if not progressed and not ready:
                    raise RuntimeError(f"plan {plan.name}: steps {waiting} can never start")  # validate() forbids
                continue
            kind, step_id, approval = self._events.get()
            if kind == "done":
                running.discard(step_id)
                self._finish(steps[step_id])
            else:
                asking.discard(step_id)
                self._answered(steps[step_id], approval, ready)
        for result in steps.values():
            if result.status == st.BLOCKED:
                result.status = st.SKIPPED
        if self.run.ok and plan.checks:
            self.run.checks_left_out = checks_left_out(plan, self.run.left_out)
            kept = [c for c in plan.checks if c.id not in self.run.checks_left_out]
            self.run.checks = run_checks(
                plan.model_copy(update={"checks": kept}), self.overrides, self.manifest, clock=self.now
            )
            for check in self.run.checks:
                self.echo(f"{'ok' if check.ok else 'FAILED':8} check {check.name}: {check.detail}")
            for check_id, why in self.run.checks_left_out.items():
                self.echo(f"{'skipped':8} check {check_id}: {why}")
        self.run.seconds = self.now()
        self.run.finished = utc_now()
        if self.recorder is not None:
            self.recorder.finish(steps.values(), self.run.finished, self.run.status)
        self._notify("run.finished")
        return self.run

    # --- deciding what can start ---------------------------------------------------------------------

    def _settle(self, waiting: list[str], ready: list[str], asking: set[str]) -> bool:
        """Move every waiting step whose needs have ended on: blocked, settled, at its gate, or ready."""
        steps, progressed = self.run.steps, False
        installed = load_plugins()
        for step_id in list(waiting):
            step, result = self.plan.step(step_id), steps[step_id]
            blockers = [n for n in step.needs if steps[n].status in st.NOT_DONE and n not in asking]
            if blockers:
                waiting.remove(step_id)
                why = " and ".join(sorted({st.NOT_DONE[steps[n].status] for n in blockers}))
                self._settled(result, st.BLOCKED, f"not run: needs {', '.join(blockers)}, which {why}")
                progressed = True
                continue
            if any(steps[n].status not in (st.OK, st.SKIPPED) for n in step.needs):
                continue
            waiting.remove(step_id)
            progressed = True
            if self._settle_without_running(step, result, installed):
                continue
            if not step.approval or self._gate(step, result, asking):
                ready.append(step_id)
        return progressed

    def _settle_without_running(self, step: Step, result: StepResult, installed: Mapping[str, Any]) -> bool:
        """Steps that end at once: done in the run being resumed, or optional and absent. True if settled."""
        if step.id in self.done_before:
            result.done_in = self.done_before[step.id]
            self._settled(result, st.OK, f"done in run {result.done_in}")
            return True
        try:
            reason = skip_reason(step, self.manifest, installed, self.run.left_out)
        except NotFound as exc:
            result.error = exc.one_line()
            self._settled(result, st.FAILED, "")
            return True
        if reason is None:
            return False
        self._settled(result, st.SKIPPED, f"skipped: {reason}")
        return True

    def _gate(self, step: Step, result: StepResult, asking: set[str]) -> bool:
        """True when the step may run now; else it waits for a person, or for a resume that approves it."""
        given = self.approvals.given(step.id)
        if given is not None:
            self._approved(result, given)
            return True
        result.status = st.AWAITING_APPROVAL
        result.started_s = self.now()
        self._record()
        self._notify("approval.needed", result)
        if self.approvals.can_ask:
            asking.add(step.id)
            self.echo(f"? {step.id} needs approval: asking")
            threading.Thread(target=self._ask, args=(step,), name=f"approve-{step.id}", daemon=True).start()
        else:
            command = f"drtool restore --resume {self.run.run_id} --approve {step.id}"
            self._settled(result, st.AWAITING_APPROVAL, f"waiting for approval: {command}")
        return False

    def _ask(self, step: Step) -> None:
        try:
            planned = planned_step(
                self.plan, step, wave_of(self.plan, step.id), self.repo, self.manifest, self.overrides
            )
            waiting = sorted(downstream(self.plan.steps, step.id))
            answer = self.approvals.ask(ApprovalRequest(step, planned, self.manifest.id, waiting))
        except Exception as exc:  # a prompt that cannot be shown is a no: the gate stays shut
            answer = self.approvals.refusal(step.id, f"not asked: {type(exc).__name__}: {exc}")
        self._events.put(("answer", step.id, answer))

    def _answered(self, result: StepResult, approval: Approval | None, ready: list[str]) -> None:
        assert approval is not None
        if approval.approved:
            self._approved(result, approval)
            result.status = st.WAITING
            ready.append(result.id)
            return
        self._record_approval(result, approval)
        self._settled(result, st.DECLINED, f"not run: {approval.describe()}")

    def _approved(self, result: StepResult, approval: Approval) -> None:
        self._record_approval(result, approval)
        self.echo(f"✔ {result.id} {approval.describe()}")

    def _record_approval(self, result: StepResult, approval: Approval) -> None:
        result.approval = approval
        result.log.append(f"{approval.at} {approval.describe()}")
        if self.recorder is not None:
            self.recorder.approval(approval.to_dict())

    # --- running and finishing steps -----------------------------------------------------------------

    def _start(self, step: Step, result: StepResult) -> None:
        result.status, result.started_s = st.RUNNING, self.now()
        if self.watcher:
            self.watcher.step_started(step.id)
            self._started.add(step.id)
        self.echo(f"▶ {step.id} ({step.uses})")
        self._record()
        threading.Thread(target=self._run_step, args=(step, result), name=f"step-{step.id}", daemon=True).start()

    def _settled(self, result: StepResult, status: str, summary: str) -> None:
        """A step that ends without running: skipped, blocked, done before, waiting for approval."""
        result.status, result.summary = status, summary or result.summary
        result.started_s = result.started_s or self.now()
        self._finish(result)

    def _finish(self, result: StepResult) -> None:
        if result.finished_s == 0.0:
            result.finished_s = self.now()
        if self.watcher and result.id in self._started:
            refused = self.watcher.step_finished(result.id)
            if refused:
                result.refused_connections = refused
                result.status = st.REFUSED
                addresses = ", ".join(sorted({r["address"] for r in refused}))
                result.error = f"connected to {addresses}, inside the failure domain of the backed-up system"
        line = f"{result.status:8} {result.id} ({format_duration(result.seconds)})"
        detail = result.error or result.summary
        self.echo(line + (f": {detail}" if detail else ""))
        result.log.append(f"{utc_now()} {detail or result.status}")
        self._record()
        if result.status in (st.FAILED, st.REFUSED):
            self._notify("step.failed", result)

    def _run_step(self, step: Step, result: StepResult) -> None:
        try:
            target = step_target(self.plan, step, self.overrides)
            unset = unresolved({**target, **step.with_})
            if unset:
                raise UsageError(
                    f"step {step.id} uses unset variable(s) {', '.join(sorted(set(unset)))}",
                    "export DRTOOL_VAR_<NAME> for each, or pass --values FILE",
                )
            for attempt in range(1, step.retries + 2):
                result.attempts = attempt
                result.log.append(f"{utc_now()} attempt {attempt} started")
                error = self._attempt(step, target, result)
                if error is None:
                    result.status, result.done_in = st.OK, self.run.run_id
                    return
                result.error = error
                result.log.append(f"{utc_now()} attempt {attempt} failed: {error}")
                if attempt <= step.retries:
                    time.sleep(RETRY_PAUSE_S * attempt)
            result.status = st.FAILED
        except DrtoolError as exc:
            result.status, result.error = st.FAILED, exc.one_line()
        except Exception as exc:  # drtool's own bug around the step: fail the step, not the whole run
            result.status, result.error = st.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        finally:
            result.finished_s = self.now()
            self._events.put(("done", step.id, None))

    def _attempt(self, step: Step, target: Mapping[str, Any], result: StepResult) -> str | None:
        """One restore + verify in the step's own process, bounded by its timeout; the error, or None."""
        guard = self.watcher.for_step_processes() if self.watcher else None
        at = step.with_.get("at")  # a point of the delta chain the plan's backup belongs to (docs/plugins.md)
        try:
            backup = self.manifest if at is None else self._chains.find_point(step.uses, self.manifest, at)
        except DrtoolError as exc:
            return exc.one_line()
        takes = getattr(load_plugins().get(step.uses), "takes_transforms", False)
        options = self.plan.options_for(step, takes)
        job = StepJob.of(self.repo, backup, step.id, step.uses, dict(target), options, guard)
        result.progress_done, result.progress_total = 0, None
        result.verification = ""
        tasks: dict[int, Task | None] = {}
        timeout = step.timeout.total_seconds() if step.timeout else None
        outcome = run_attempt(job, timeout, lambda event: self._on_event(result, tasks, event))
        for task in tasks.values():
            if task is not None:
                task.done()
        if outcome.survivors:
            result.log.append(f"{utc_now()} processes {outcome.survivors} of its group outlived SIGKILL")
        if outcome.timed_out:
            result.log.append(f"{utc_now()} timed out: process {outcome.pid} and its process group killed")
            return f"timed out after {format_duration(step.timeout)}"  # type: ignore[arg-type]
        if outcome.error is not None:
            result.log += [outcome.traceback] if outcome.traceback else outcome.output_tail
            return outcome.error
        assert outcome.result is not None
        result.changed, result.summary = outcome.result.changed, outcome.result.summary
        result.recovery_point = str(outcome.result.details.get("recovery_point") or "")
        result.checks = list(outcome.checks)
        result.verification = verification(outcome.checks)
        result.log += [f"check {'ok' if c.ok else 'FAILED'}: {c.name} {c.detail}".rstrip() for c in outcome.checks]
        if result.verification == NO_CHECKS:
            result.log.append(f"{utc_now()} {VERDICT_TEXT[NO_CHECKS]}")
        failed = [c.name for c in outcome.checks if not c.ok]
        return f"verification failed: {', '.join(failed)}" if failed else None

    def _on_event(self, result: StepResult, tasks: dict[int, Task | None], event: dict[str, Any]) -> None:
        """Progress and refusals from a step's process, replayed here (its reader thread calls this)."""
        if "refused" in event:
            if self.watcher is not None:
                refused = event["refused"]
                self.watcher.refused_in_step(result.id, refused["host"], refused.get("port"), refused["reason"])
        elif "task" in event:
            total = event.get("total")
            if total:
                result.progress_total = (result.progress_total or 0) + int(total)
            tasks[event["task"]] = self.progress.task(event["description"], total) if self.progress else None
        elif "advance" in event:
            result.progress_done += int(event["by"])
            task = tasks.get(event["advance"])
            if task is not None:
                task.advance(int(event["by"]))
        elif "done" in event:
            task = tasks.pop(event["done"], None)
            if task is not None:
                task.done()

    # --- telling others ------------------------------------------------------------------------------

    def _record(self) -> None:
        if self.recorder is not None:
            self.recorder.steps(self.run.steps.values())

    def _notify(self, name: str, step: StepResult | None = None) -> None:
        if self.notifier is not None:
            self.notifier.event(name, self.run, step, self.elapsed_before_s + self.now())
