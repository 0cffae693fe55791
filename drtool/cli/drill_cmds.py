"""`drtool drills` and `drtool runbook`: the record of rehearsals, and a plan written down for people.

Rehearsals themselves run into labs (`drtool rehearse`, a command of the lab); their record lives in the
catalog, which these read wherever drtool runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli import drill_matrix_cmds
from drtool.cli.plan_cmds import PlanOpt, ValuesOpt, load_checked, open_plan_repo
from drtool.cli.state import console, print_json, state


def drills(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    matrix: Annotated[bool, typer.Option("--matrix", help="Every scenario against its latest drill.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="With --matrix: folder for drills.json/.html.")] = None,
    metrics: Annotated[Path | None, typer.Option("--metrics", help="With --matrix: Prometheus textfile.")] = None,
) -> None:
    """The history of rehearsals: date, plan, backup, RPO, RTO, objectives met, independence verdict."""
    from drtool.catalog.runs import RunLog
    from drtool.durations import format_duration

    if matrix:
        drill_matrix_cmds.matrix(ctx, as_json, out, metrics)
        return

    rows = RunLog(state(ctx).open_catalog()).drills()
    if as_json:
        print_json([r.model_dump() for r in rows])
        return
    table = Table("date", "plan", "backup", "RTO", "RPO", "objectives", "independence", "result")
    for r in rows:
        met = [m for m in (r.rto_met, r.rpo_met) if m is not None]
        table.add_row(
            r.started[:19],
            r.plan_name,
            r.backup_id,
            format_duration(r.rto_s),
            "-" if r.rpo_s is None else format_duration(r.rpo_s),
            "-" if not met else ("met" if all(met) else "[red]missed[/]"),
            r.independence,
            "[green]ok[/]" if r.ok else "[red]failed[/]",
        )
    console.print(table)
    if not rows:
        console.print("no drills yet: `drtool rehearse --plan FILE` records one")


def runbook(
    ctx: typer.Context,
    plan: PlanOpt,
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file (default: standard output).")] = None,
    values: ValuesOpt = None,
    standby_set: Annotated[
        str | None, typer.Option("--standby-set", help="Add failover and failback to this set's warm standby.")
    ] = None,
) -> None:
    """A Markdown runbook for people, from the plan and the latest backup it would restore."""
    from drtool.runbook import render_runbook

    loaded = load_checked(plan, values)
    app_state = state(ctx)
    text = render_runbook(loaded, open_plan_repo(ctx, loaded.require()), app_state.settings, standby_set)
    if out:
        out.write_text(text)
        console.print(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.command()(drills)
    app.command()(drill_matrix_cmds.drill)
    app.command()(runbook)
