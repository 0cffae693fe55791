"""`drtool runs list|show`: plan runs (restores and rehearsals) as the catalog recorded them, finished or not."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.run_view import catalog_rows, steps_table
from drtool.cli.state import console, print_json, state

app = typer.Typer(
    help="Plan runs recorded in the catalog: restores and rehearsals (docs/plans.md).", no_args_is_help=True
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@app.command("list")
def list_runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many of the latest runs.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The latest plan runs, newest first."""
    from drtool.catalog.runs import RunLog

    runs = RunLog(state(ctx).open_catalog()).runs(limit)
    if as_json:
        print_json([r.model_dump() for r in runs])
        return
    table = Table("run", "kind", "plan", "backup", "started", "status", "resumed from")
    for r in runs:
        table.add_row(r.id, r.kind, r.plan_name, r.backup_id, r.started, r.status, r.resumed_from)
    console.print(table)


@app.command()
def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="A run id or its unique prefix (`drtool runs list`).")],
    as_json: JsonOpt = False,
) -> None:
    """One run's steps, its approvals and how to continue it; also while it runs, from any terminal.

    Statuses: waiting, running (with its time so far), ok, failed, waiting for approval, skipped."""
    from drtool.catalog.runs import RunLog

    log = RunLog(state(ctx).open_catalog())
    run = log.run(run_id)
    rows = catalog_rows(run, log.steps(run.id), dt.datetime.now(dt.UTC))
    approvals = [a.model_dump(exclude={"id", "run_id"}) for a in log.approvals(run.id)]
    waiting = [r["step"] for r in rows if r["status"] in ("awaiting-approval", "declined")]
    resume = _resume_hint(run.id, run.kind, run.status, waiting)
    if as_json:
        print_json({"run": run.model_dump(), "steps": rows, "approvals": approvals, "continue_with": resume})
        return
    console.print(steps_table(rows, f"{run.kind} {run.id}: plan {run.plan_name}, backup {run.backup_id}"))
    console.print(f"started {run.started}, {run.status}" + (f", finished {run.finished}" if run.finished else ""))
    for a in approvals:
        verdict = "approved" if a["approved"] else "refused"
        console.print(
            f"{a['step_id']}: {verdict} by {a['approver']} ({a['os_user']}@{a['host']}) at {a['at']}, {a['how']}"
        )
    if resume:
        console.print(f"to continue: {resume}", highlight=False)


def _resume_hint(run_id: str, kind: str, status: str, waiting: list[str]) -> str | None:
    """The command that continues a restore run that did not end ok (rehearsals are run again instead)."""
    if kind != "restore" or status in ("ok", "running"):
        return None
    return f"drtool restore --resume {run_id}" + "".join(f" --approve {s}" for s in waiting)
