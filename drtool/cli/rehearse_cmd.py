"""`drtool rehearse`: prove a plan works, into a fresh target (or a cluster of your own), with the source unreachable.

The fresh target comes from a target provider (drtool/rehearsal/target.py: the lab's, where the lab is installed);
the record it keeps is read by `drtool drills` (drtool/cli/drill_cmds.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.independence_cmd import inside_failure_domain
from drtool.cli.plan_cmds import PlanOpt, ValuesOpt, load_checked, open_plan_repo
from drtool.cli.state import console, progress, state
from drtool.errors import SourceError, UsageError


def rehearse(
    ctx: typer.Context,
    plan: PlanOpt,
    backup: Annotated[
        str | None, typer.Option("--backup", help="Backup id or prefix (default: the plan's source).")
    ] = None,
    target: Annotated[
        str, typer.Option("--target", help="`lab` (a fresh lab, where the lab is installed) or a kubeconfig's path.")
    ] = "lab",
    keep: Annotated[bool, typer.Option(help="Leave the target running afterwards.")] = False,
    source_lab: Annotated[
        str | None, typer.Option("--source-lab", help="A lab that is the backup's source: stopped for the rehearsal.")
    ] = None,
    failure_time: Annotated[
        str | None, typer.Option("--failure-time", help="Simulated failure time for RPO (ISO 8601; default now).")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Where the report is written.")] = Path("drtool-reports"),
    values: ValuesOpt = None,
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation",
            help="auto (a network namespace where possible), netns (root and iproute2) or in-process (the guard only).",
        ),
    ] = "auto",
) -> None:
    """Restore a plan into a fresh target with the source unreachable; measure RTO/RPO; write the report.

    Example: drtool rehearse --plan restore-plans/full-cluster-rebuild.yaml --source-lab source"""
    from drtool.plans.notify import webhook_for
    from drtool.rehearsal.rehearse import RehearsalOptions
    from drtool.rehearsal.rehearse import rehearse as run_rehearsal
    from drtool.rehearsal.target import provider

    when = None
    if failure_time:
        try:
            when = dt.datetime.fromisoformat(failure_time.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--failure-time {failure_time!r} is not a time", "e.g. 2026-11-29T10:00:00Z") from None
        when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    loaded = load_checked(plan, values)
    app_state = state(ctx)
    options = RehearsalOptions(
        backup=backup,
        target=target,
        keep=keep,
        source=provider().source(source_lab) if source_lab else None,
        failure_time=when,
        out_dir=out,
        isolation=isolation,
    )
    notifier = webhook_for(loaded.require(), "rehearsal")  # its thread starts here, outside any isolation
    try:
        with progress() as prog:
            result = run_rehearsal(
                loaded,
                open_plan_repo(ctx, loaded.require()),
                options,
                catalog=app_state.open_catalog(),
                notifier=notifier,
                echo=lambda line: console.print(line, style="dim", highlight=False),
                progress=prog,
            )
    finally:
        if notifier is not None:
            notifier.close()
    print_rehearsal(result.report)
    for kind, path in sorted(result.paths.items()):
        console.print(f"report ({kind}): {path}", highlight=False)
    if not result.restored:
        raise SourceError(f"rehearsal of plan {loaded.require().name} failed", f"read {result.paths['html']}")
    if not result.independent:  # restored, but it needs something that died with the source
        raise inside_failure_domain(result.report["independence"], result.paths["html"])


def print_rehearsal(report: dict) -> None:  # type: ignore[type-arg]
    from drtool.durations import format_duration
    from drtool.report.view import (  # jinja2 loads with drtool.report: only commands that print pay
        approval_note,
        left_out_rows,
    )

    run = report["run"]
    table = Table("step", "plugin", "status", "start s", "seconds", "detail", title=f"rehearsal {run['id']}")
    for s in run["steps"]:
        colour = {"ok": "green", "skipped": "yellow"}.get(s["status"], "red")
        table.add_row(
            s["id"],
            s["uses"],
            f"[{colour}]{s['status']}[/]",
            f"{s['started_s']:.1f}",
            f"{s['finished_s'] - s['started_s']:.1f}",
            "; ".join(filter(None, (s["error"] or s["summary"], approval_note(s.get("approval"))))),
        )
    console.print(table)
    failed = [c for c in report["checks"] if not c["ok"]]
    console.print(f"{len(report['checks']) - len(failed)} of {len(report['checks'])} checks passed", highlight=False)
    for c in failed:
        console.print(f"  [red]FAILED[/] {c['step']}: {c['name']} — {c['detail']}", highlight=False)
    for what, name, why in left_out_rows(run):
        console.print(f"  [yellow]left out[/] {what} {name}: {why}", highlight=False)
    rto, rpo = run["rto"], run["rpo"]
    failed_steps = [s["id"] for s in run["steps"] if s["status"] in ("failed", "refused")]
    rto_text = f"not recovered (failed: {', '.join(failed_steps)})" if failed_steps else _versus(rto)
    console.print(f"RTO {rto_text}   RPO {_versus(rpo)}", highlight=False)
    if rto.get("restored_s") is not None:
        service = format_duration(rto["service_s"]) if rto.get("service_s") is not None else "not reached"
        console.print(f"restore steps done {format_duration(rto['restored_s'])}, in service {service}", highlight=False)
    for t in run.get("training") or []:
        torn = f", step {', '.join(map(str, t['torn_steps']))} torn" if t["torn_steps"] else ""
        lost = format_duration(t["wall_time_lost_s"]) if t.get("wall_time_lost_s") is not None else "unknown"
        console.print(
            f"training {t['folder']}: resumed from step {t['recovery_step']}{torn}; at least "
            f"{t['steps_lost_at_least']} steps and {lost} of training lost",
            highlight=False,
        )
    isolation = run.get("isolation") or {}
    console.print(f"isolation: {isolation.get('mode')} — covers {isolation.get('covers')}", highlight=False)
    for pair in run.get("bug_pairs") or []:
        console.print(f"  [red]BUG[/] refused {pair['address']} ({pair['by']}), analysis: {pair['analysis']}")
    independence = report.get("independence") or {}
    counts = independence.get("counts") or {}
    console.print(
        f"independence: {independence.get('verdict', 'not analysed')} — {counts.get('inside', 0)} inside the failure "
        f"domain, {counts.get('unknown', 0)} unknown, {counts.get('waived', 0)} waived, "
        f"{counts.get('remediated', 0)} remediated, {counts.get('independent', 0)} independent",
        highlight=False,
    )


def _versus(measure: dict) -> str:  # type: ignore[type-arg]
    from drtool.durations import format_duration

    value = "-" if measure["measured_s"] is None else format_duration(measure["measured_s"])
    if measure["objective_s"] is None:
        return f"{value} (no objective)"
    return f"{value} vs objective {format_duration(measure['objective_s'])}: {'met' if measure['met'] else 'MISSED'}"
