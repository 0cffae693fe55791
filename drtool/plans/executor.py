"""Running a plan: steps in dependency order, independent ones in parallel, each timed, retried and logged.

A step is one plugin's restore of the chosen backup followed by that plugin's verify. Steps whose needs are
all met run at once, at most ``plan.parallelism`` together. A failed step stops only what needs it; the rest
of the plan still runs, so one resume finishes the job. Every step's outcome is written to the catalog as it
ends (``drtool.catalog.recorder``), so a crash or Ctrl-C loses nothing: `drtool restore --resume RUN` re-runs
the steps that did not end ``ok`` (each step's row records the run it was done in), which is safe because
plugin restores are idempotent. The backup is a ``Manifest`` resolved once by the caller and passed on to
every step's restore.

A step's ``timeout`` bounds each attempt: a plugin call cannot be killed from outside its thread, so a
timed-out attempt is abandoned (its thread is a daemon and its result ignored) and counts as failed.
"""

from __future__ import annotations

import dataclasses
import queue
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from drtool.errors import DrtoolError, NotFound, UsageError
from drtool.plans.checks import checks_left_out, run_checks
from drtool.plans.dag import waves
from drtool.plans.loader import LoadedPlan
from drtool.plans.schema import Plan, Step, format_duration
from drtool.plans.steps import skip_reason, step_target
from drtool.plans.validate import validate
from drtool.plugin.contract import Check
from drtool.plugin.manager import load_plugins
from drtool.progress import Progress
from drtool.repo.manifest import Manifest, utc_now
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.restore import run_restore

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog
    from drtool.catalog.recorder import RunRecorder

RETRY_PAUSE_S = 1.0
Echo = Callable[[str], None]


class StepWatcher(Protocol):
    """Told when steps start and end (the rehearsal's network guard attributes connections with it)."""

    def step_started(self, step_id: str) -> None: ...

    def step_finished(self, step_id: str) -> list[dict[str, Any]]:
        """Connections refused while the step ran (each a dict with at least ``address``)."""
        ...


@dataclasses.dataclass
class StepResult:
    id: str
    uses: str
    needs: list[str]
    status: str = "pending"  # ok | failed | skipped | refused
    started_s: float = 0.0
    finished_s: float = 0.0
    attempts: int = 0
    changed: bool = False
    summary: str = ""
    error: str = ""
    done_in: str = ""  # the run in which the step ended ok (an earlier one when a resume took it over)
    checks: list[Check] = dataclasses.field(default_factory=list)
    log: list[str] = dataclasses.field(default_factory=list)
    refused_connections: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.finished_s - self.started_s

    def to_dict(self) -> dict[str, Any]:
        """The shape reports read (docs/rehearsal.md): no logs, checks as plain dicts."""
        out = dataclasses.asdict(self)
        out.pop("log")
        out["checks"] = [dataclasses.asdict(c) for c in self.checks]
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
        steps_ok = all(s.status in ("ok", "skipped") for s in self.steps.values())
        return steps_ok and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[StepResult]:
        return [s for s in self.steps.values() if s.status in ("failed", "refused")]


@dataclasses.dataclass
class PlannedStep:
    """What a dry run says about one step."""

    id: str
    uses: str
    wave: int
    action: str  # "restore" or "skip"
    reason: str = ""
    artifacts: int = 0
    bytes: int = 0
    target_keys: list[str] = dataclasses.field(default_factory=list)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    unset: list[str] = dataclasses.field(default_factory=list)


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


def _unresolved(value: Any) -> list[str]:
    """``${VAR}`` references the loader could not fill, anywhere in a step's target or options."""
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _unresolved(item)]
    if isinstance(value, list):
        return [v for item in value for v in _unresolved(item)]
    return [value] if isinstance(value, str) and "${" in value else []


def ensure_valid(loaded: LoadedPlan) -> Plan:
    """The plan, once schema, graph and plugins are checked (a cycle would never finish)."""
    if not loaded.validated:
        validate(loaded, load_plugins())
    return loaded.require()


def dry_run(
    loaded: LoadedPlan,
    repo: Repository,
    manifest: Manifest,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[PlannedStep]:
    """What a run would do, without touching any target: order, skips, sizes; every chunk checked present."""
    plan = ensure_valid(loaded)
    installed = load_plugins()
    out: list[PlannedStep] = []
    for wave_no, wave in enumerate(waves(plan.steps)):
        for step_id in wave:
            step = plan.step(step_id)
            planned = PlannedStep(step.id, step.uses, wave_no, "restore", options=dict(step.with_))
            try:
                reason = skip_reason(step, manifest, installed)
            except NotFound as exc:
                planned.action, planned.reason = "fail", exc.message
                out.append(planned)
                continue
            if reason:
                planned.action, planned.reason = "skip", reason
            else:
                entries = manifest.artifacts_of(step.uses)
                planned.artifacts, planned.bytes = len(entries), sum(a.size for a in entries)
                PluginRestoreContext(repo, manifest, step.uses).preflight()
                target = step_target(plan, step, overrides)
                planned.target_keys = sorted(target)
                planned.unset = sorted(set(_unresolved({**target, **step.with_})))
            out.append(planned)
    return out


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
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        catalog: Catalog | None = None,
        kind: str = "restore",
        values_path: Path | None = None,
        done_before: Mapping[str, str] | None = None,  # step id -> run id where it already ended ok
        resumed_from: str = "",
        watcher: StepWatcher | None = None,
        echo: Echo = lambda _line: None,
        progress: Progress | None = None,
        left_out: Mapping[str, str] | None = None,  # plugin -> why: its steps are skipped, never failed
    ) -> None:
        self.plan = ensure_valid(loaded)
        self.repo = repo
        self.manifest = manifest
        self.overrides = overrides or {}
        self.done_before = dict(done_before or {})
        self.watcher = watcher
        self.echo = echo
        self.progress = progress
        self.run = RunResult(new_run_id(), self.plan, manifest.id, utc_now(), resumed_from=resumed_from)
        self.run.left_out = dict(left_out or {})
        self.run.steps = {s.id: StepResult(s.id, s.uses, list(s.needs)) for s in self.plan.steps}
        self.recorder = _recorder(catalog, self.run, loaded, kind, str(values_path or ""), repo.config.store_id)
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._started: set[str] = set()  # steps the watcher was told about

    def now(self) -> float:
        return time.monotonic() - self._t0

    def execute(self) -> RunResult:
        """Run every step that can run; the result says which failed (nothing is raised for a failed step)."""
        plan, steps = self.plan, self.run.steps
        installed = load_plugins()
        finished: queue.Queue[str] = queue.Queue()
        running: set[str] = set()
        pending = [s.id for s in plan.steps]
        self.echo(f"run {self.run.run_id}: plan {plan.name}, backup {self.run.backup_id}")
        while pending or running:
            for step_id in list(pending):
                step, result = plan.step(step_id), steps[step_id]
                blockers = [n for n in step.needs if steps[n].status in ("failed", "refused", "blocked")]
                if blockers:
                    pending.remove(step_id)
                    result.status, result.summary = "blocked", f"not run: needs {', '.join(blockers)}, which failed"
                    result.started_s = result.finished_s = self.now()
                    self._finish(result, "blocked")
                    continue
                if any(steps[n].status in ("pending", "running") for n in step.needs):
                    continue
                if len(running) >= plan.parallelism:
                    break
                pending.remove(step_id)
                if self._settle_without_running(step, result, installed):
                    continue
                running.add(step_id)
                result.status, result.started_s = "running", self.now()
                if self.watcher:
                    self.watcher.step_started(step_id)
                    self._started.add(step_id)
                self.echo(f"▶ {step_id} ({step.uses})")
                threading.Thread(
                    target=self._run_step, args=(step, result, finished), name=f"step-{step_id}", daemon=True
                ).start()
            if not running:
                continue
            done = finished.get()
            running.discard(done)
            self._finish(steps[done], steps[done].status)
        for result in steps.values():
            if result.status == "blocked":
                result.status = "skipped"
        if self.run.ok and plan.checks:
            self.run.checks_left_out = checks_left_out(plan, self.run.left_out)
            kept = [c for c in plan.checks if c.id not in self.run.checks_left_out]
            self.run.checks = run_checks(plan.model_copy(update={"checks": kept}), self.overrides)
            for check in self.run.checks:
                self.echo(f"{'ok' if check.ok else 'FAILED':8} check {check.name}: {check.detail}")
            for check_id, why in self.run.checks_left_out.items():
                self.echo(f"{'skipped':8} check {check_id}: {why}")
        self.run.seconds = self.now()
        self.run.finished = utc_now()
        if self.recorder is not None:
            self.recorder.finish(steps.values(), self.run.finished, self.run.ok)
        return self.run

    def _settle_without_running(self, step: Step, result: StepResult, installed: Mapping[str, Any]) -> bool:
        """Steps that end at once: done in the run being resumed, or optional and absent. True if settled."""
        if step.id in self.done_before:
            result.done_in = self.done_before[step.id]
            result.status, result.summary = "ok", f"done in run {result.done_in}"
        else:
            try:
                reason = skip_reason(step, self.manifest, installed, self.run.left_out)
            except NotFound as exc:
                result.status, result.error = "failed", exc.one_line()
            else:
                if reason is None:
                    return False
                result.status, result.summary = "skipped", f"skipped: {reason}"
        result.started_s = result.finished_s = self.now()
        self._finish(result, result.status)
        return True

    def _finish(self, result: StepResult, status: str) -> None:
        if result.finished_s == 0.0:
            result.finished_s = self.now()
        if self.watcher and result.id in self._started:
            refused = self.watcher.step_finished(result.id)
            if refused:
                result.refused_connections = refused
                result.status = "refused"
                addresses = ", ".join(sorted({r["address"] for r in refused}))
                result.error = f"connected to {addresses}, inside the failure domain of the backed-up system"
        line = f"{result.status:8} {result.id} ({format_duration(result.seconds)})"
        detail = result.error or result.summary
        self.echo(line + (f": {detail}" if detail else ""))
        result.log.append(f"{utc_now()} {detail or result.status}")
        if self.recorder is not None:
            with self._lock:
                self.recorder.steps(self.run.steps.values())

    def _run_step(self, step: Step, result: StepResult, finished: queue.Queue[str]) -> None:
        try:
            target = step_target(self.plan, step, self.overrides)
            unset = _unresolved({**target, **step.with_})
            if unset:
                raise UsageError(
                    f"step {step.id} uses unset variable(s) {', '.join(sorted(set(unset)))}",
                    "export them or pass --values FILE",
                )
            for attempt in range(1, step.retries + 2):
                result.attempts = attempt
                result.log.append(f"{utc_now()} attempt {attempt} started")
                error = self._attempt(step, target, result)
                if error is None:
                    result.status, result.done_in = "ok", self.run.run_id
                    return
                result.error = error
                result.log.append(f"{utc_now()} attempt {attempt} failed: {error}")
                if attempt <= step.retries:
                    time.sleep(RETRY_PAUSE_S * attempt)
            result.status = "failed"
        except DrtoolError as exc:
            result.status, result.error = "failed", exc.one_line()
        except Exception as exc:  # a plugin bug must fail its step, not the whole run
            result.status, result.error = "failed", f"internal error: {type(exc).__name__}: {exc}"
            result.log.append(traceback.format_exc())
        finally:
            result.finished_s = self.now()
            finished.put(step.id)

    def _attempt(self, step: Step, target: Mapping[str, Any], result: StepResult) -> str | None:
        """One restore + verify, bounded by the step's timeout; the error, or None when verified."""
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["outcome"] = run_restore(
                    self.repo,
                    self.manifest,
                    load_plugins()[step.uses],
                    target,
                    options=step.with_,
                    progress=self.progress,
                )
            except DrtoolError as exc:
                box["error"] = exc.one_line()
            except Exception as exc:
                box["error"] = f"internal error: {type(exc).__name__}: {exc}"
                box["traceback"] = traceback.format_exc()

        worker = threading.Thread(target=call, name=f"step-{step.id}-attempt", daemon=True)
        worker.start()
        worker.join(step.timeout.total_seconds() if step.timeout else None)
        if worker.is_alive():
            return f"timed out after {format_duration(step.timeout)}"  # type: ignore[arg-type]
        if "traceback" in box:
            result.log.append(box["traceback"])
        if "error" in box:
            return str(box["error"])
        outcome = box["outcome"]
        result.changed = outcome.result.changed
        result.summary = outcome.result.summary
        result.checks = list(outcome.checks)
        result.log += [f"check {'ok' if c.ok else 'FAILED'}: {c.name} {c.detail}".rstrip() for c in outcome.checks]
        failed = [c.name for c in outcome.checks if not c.ok]
        return f"verification failed: {', '.join(failed)}" if failed else None
