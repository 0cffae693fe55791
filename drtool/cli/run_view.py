"""How a plan run looks: one table of steps, live while it runs and from the catalog afterwards.

While `drtool restore --plan` runs on a terminal the table is redrawn in place (rich ``Live``), with each
running step's elapsed time and progress; elsewhere (a pipe, a CI log) each change is one plain line. A
question at an approval gate pauses the redrawing, asks on stderr and defaults to no. `drtool runs show`
draws the same table from the catalog's rows, for a finished run or one still running elsewhere.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from drtool.cli.state import human_bytes

if TYPE_CHECKING:
    from drtool.catalog.runs import RestoreRunRow, StepRunRow
    from drtool.plans.approval import ApprovalRequest
    from drtool.plans.executor import Executor
    from drtool.plans.results import RunResult, StepResult

LABELS = {"waiting": "waiting", "awaiting-approval": "waiting for approval", "running": "running"}
STYLES = {"ok": "green", "skipped": "yellow", "running": "cyan", "waiting": "dim", "awaiting-approval": "magenta",
          "declined": "magenta"}  # fmt: skip


def row(
    step_id: str,
    uses: str,
    status: str,
    seconds: float,
    attempts: int,
    detail: str,
    progress: tuple[int, int | None] = (0, None),
) -> dict[str, Any]:
    """One step as the table (and --json) shows it."""
    done, total = progress
    shown = f"{human_bytes(done)} / {human_bytes(total)}" if total else (human_bytes(done) if done else "")
    return {"step": step_id, "plugin": uses, "status": status, "seconds": round(seconds, 1), "attempts": attempts,
            "progress": shown, "detail": detail}  # fmt: skip


def live_rows(run: RunResult, now_s: float) -> list[dict[str, Any]]:
    """The steps of a run in this process; a running step's time is its time so far."""
    return [_live_row(s, now_s) for s in run.steps.values()]


def _live_row(s: StepResult, now_s: float) -> dict[str, Any]:
    ongoing = s.status in ("running", "awaiting-approval") and s.finished_s == 0.0
    seconds = now_s - s.started_s if ongoing and s.started_s else s.seconds
    detail = s.error or s.summary or (s.approval.describe() if s.approval else "")
    return row(s.id, s.uses, s.status, max(seconds, 0.0), s.attempts, detail, (s.progress_done, s.progress_total))


def catalog_rows(run: RestoreRunRow, steps: Iterable[StepRunRow], now: dt.datetime) -> list[dict[str, Any]]:
    """The steps of a recorded run; while it still runs, a running step's time is counted up to ``now``."""
    since_start = (now - dt.datetime.fromisoformat(run.started.replace("Z", "+00:00"))).total_seconds()
    out = []
    for s in steps:
        ongoing = run.status == "running" and s.status in ("running", "awaiting-approval")
        seconds = since_start - s.started_s if ongoing else s.finished_s - s.started_s
        out.append(row(s.step_id, s.uses, s.status, max(seconds, 0.0), s.attempts, s.error or s.summary))
    return out


def steps_table(rows: list[dict[str, Any]], title: str) -> Table:
    from drtool.durations import format_duration

    table = Table("step", "plugin", "status", "time", "attempts", "progress", "detail", title=title)
    for r in rows:
        style = STYLES.get(r["status"], "red")
        label = LABELS.get(r["status"], r["status"])
        table.add_row(r["step"], r["plugin"], f"[{style}]{label}[/]", format_duration(r["seconds"]),
                      str(r["attempts"]), r["progress"], r["detail"])  # fmt: skip
    return table


class RunView:
    """The live table (on a terminal) or plain lines (elsewhere) of one run, and the approval prompt."""

    def __init__(self, console: Console, *, live: bool, quiet: bool = False) -> None:
        self.console = console
        self.live = live
        self.quiet = quiet  # --json: stdout holds only the final document
        self._live: Live | None = None

    def echo(self, line: str) -> None:
        if not self.quiet:
            self.console.print(line, style="dim", highlight=False, soft_wrap=True)

    @contextlib.contextmanager
    def showing(self, executor: Executor) -> Iterator[None]:
        """Redraw the table of the executor's run in place until the block ends (only on a terminal)."""
        if not self.live or self.quiet:
            yield
            return

        def render() -> Table:
            return steps_table(live_rows(executor.run, executor.now()), f"run {executor.run.run_id}")

        with Live(get_renderable=render, console=self.console, refresh_per_second=4, transient=True) as live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    def ask(self, request: ApprovalRequest) -> bool:
        """The approval prompt: what the step will change, then yes or no (no unless the answer is yes)."""
        err = Console(stderr=True, highlight=False)
        with self._paused():
            for line in describe(request):
                err.print(line, soft_wrap=True)
            try:
                answer = err.input(f"Approve step [bold]{escape(request.step.id)}[/]? \\[y/N] ")
            except EOFError:
                answer = ""
        return answer.strip().lower() in ("y", "yes")

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        live = self._live
        if live is None:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            live.start()


def describe(request: ApprovalRequest) -> list[str]:
    """What a person approving a step reads: the step, and from its dry run what it will change."""
    step, planned = request.step, request.planned
    lines = [f"[bold]Step {step.id}[/] (plugin {step.uses}) needs approval before it runs."]
    if step.description:
        lines.append(f"  {step.description}")
    lines.append(
        f"  It will restore {planned.artifacts} artifact(s), {human_bytes(planned.bytes)}, from backup "
        f"{request.backup_id} into its target ({', '.join(planned.target_keys) or 'no target keys'})."
    )
    if planned.options:
        lines.append("  Options: " + ", ".join(f"{k}={v}" for k, v in planned.options.items()))
    if planned.unset:
        lines.append(f"  Unset variables (the step will fail): {', '.join(planned.unset)}")
    if request.waiting:
        lines.append(f"  Waiting for it: {', '.join(request.waiting)}.")
    return lines
