"""`drtool schedule run | run-once SET | list`: scheduled backups of the config's backup sets."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from drtool.cli.state import AppState, console, print_json, state
from drtool.errors import PartialBackup, Terminated, UsageError

app = typer.Typer(help="Scheduled backups of the config's backup sets (docs/scheduling.md).", no_args_is_help=True)

MetricsAddress = Annotated[
    str, typer.Option("--metrics-address", help="Serve Prometheus /metrics on HOST:PORT ('' to disable).")
]


def _runner(app_state: AppState) -> Any:
    from drtool.catalog.listing import newest_complete
    from drtool.scheduler.runner import SetRunner, Stopper

    sets = app_state.settings.backup_sets
    if not sets:
        raise UsageError("no backup sets in the config", "add `backup_sets:` to the config file (docs/scheduling.md)")
    stopper = Stopper()
    stopper.install()
    repo = app_state.open_repo()
    catalog = app_state.open_catalog()
    runner = SetRunner(repo, sets, app_state.settings.sources, catalog=catalog, stopper=stopper)
    catalog.sync(repo)
    newest = newest_complete(catalog.backups(repo.config.store_id), sets, repo.stored_times(), repo.max_skew)
    for name, row in newest.items():
        runner.metrics.seen_backup(name, row.started, row.finished)
    return runner


@app.command("run")
def run(
    ctx: typer.Context,
    metrics_address: MetricsAddress = "127.0.0.1:9464",
    max_runs: Annotated[int | None, typer.Option(help="Stop after this many runs (drills, tests).")] = None,
) -> None:
    """Run backups on schedule until SIGTERM/SIGINT, pruning each set after its run; exits 0 when stopped."""
    from drtool.scheduler.service import SchedulerService

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    app_state = state(ctx)
    runner = _runner(app_state)
    if metrics_address:
        runner.metrics.serve(metrics_address)
    service = SchedulerService(runner, runner.catalog.engine)
    for name, bset in runner.sets.items():
        console.print(f"set [bold]{name}[/]: {bset.schedule_text()}, plugins {', '.join(bset.plugins)}")
    for result in service.run(max_runs=max_runs):
        _print_result(result)
    console.print("scheduler stopped")


@app.command("run-once")
def run_once(
    ctx: typer.Context,
    backup_set: Annotated[str, typer.Argument(metavar="SET", help="The backup set to run now.")],
    metrics_textfile: Annotated[
        str | None, typer.Option(help="Write metrics here (node_exporter textfile collector, *.prom).")
    ] = None,
    pushgateway: Annotated[str | None, typer.Option(help="Push metrics to this Pushgateway (host:port).")] = None,
    prune: Annotated[
        bool, typer.Option(help="Prune after the backup; --no-prune when prune runs elsewhere, with other keys.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Back up one set now and prune it, as a Kubernetes CronJob does. Exit 0 ok, 8 partial, else the error's code."""
    from drtool.scheduler.runner import Interrupted

    app_state = state(ctx)
    if backup_set not in app_state.settings.backup_sets:
        known = ", ".join(app_state.settings.backup_sets) or "none"
        raise UsageError(f"no backup set {backup_set!r} in the config", f"known sets: {known}")
    runner = _runner(app_state)
    try:
        result = runner.run(backup_set, prune=prune)
    except Interrupted:
        raise Terminated("interrupted: the backup was abandoned, nothing was published") from None
    finally:
        if metrics_textfile:
            runner.metrics.write_textfile(metrics_textfile)
        if pushgateway:
            runner.metrics.push(pushgateway, job="drtool", grouping={"set": backup_set})
    if as_json:
        print_json(_result_json(result))
    else:
        _print_result(result)
    if result.status == "partial":
        raise PartialBackup(f"backup {result.backup_id} of set {backup_set} is partial: {result.error}")
    if result.status == "failed":
        sys.stderr.write(f"drtool: error: backup of set {backup_set} failed: {result.error}\n")
        raise typer.Exit(result.exit_code)


def _result_json(result: Any) -> dict[str, Any]:
    return {
        "set": result.backup_set,
        "status": result.status,
        "backup_id": result.backup_id,
        "reason": result.reason,
        "error": result.error,
        "duration_s": round(result.duration, 3),
        "prune": result.prune.to_json() if result.prune else None,
        "prune_note": result.prune_note,
    }


def _print_result(result: Any) -> None:
    from drtool.durations import format_duration

    color = {"ok": "green", "partial": "yellow"}.get(result.status, "red")
    line = f"set {result.backup_set}: [{color}]{result.status}[/] {result.backup_id}"
    if result.error:
        line += f" — {result.error}"
    if result.prune:
        line += f"; pruned {len(result.prune.forgotten)} backup(s), {result.prune.chunks_deleted} chunk(s)"
    if result.prune_note:
        line += f"; {result.prune_note}"
    console.print(line + f" ({format_duration(result.duration)})")


@app.command("list")
def list_sets(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Backup sets: schedule, next run, last result, and the age of the newest backup against the RPO."""
    from drtool.catalog.listing import newest_complete
    from drtool.durations import format_duration
    from drtool.scheduler.history import RunHistory
    from drtool.scheduler.service import next_runs, trigger_for

    app_state = state(ctx)
    sets = app_state.settings.backup_sets
    if not sets:
        raise UsageError("no backup sets in the config", "add `backup_sets:` to the config file (docs/scheduling.md)")
    repo = app_state.open_repo()
    catalog = app_state.open_catalog()
    catalog.sync(repo)
    history = RunHistory(catalog.engine)
    stored = next_runs(catalog.engine)
    now = dt.datetime.now(dt.UTC)
    newest = {
        name: row.started
        for name, row in newest_complete(
            catalog.backups(repo.config.store_id), sets, repo.stored_times(), repo.max_skew
        ).items()
    }
    rows = []
    for name, bset in sets.items():
        nxt = None if bset.follow is not None else stored.get(name) or trigger_for(bset).get_next_fire_time(None, now)
        last = history.last(name)
        age = (now - dt.datetime.fromisoformat(newest[name])).total_seconds() if name in newest else None
        objective = bset.rpo.total_seconds() if bset.rpo else None
        rows.append(
            {
                "set": name,
                "schedule": bset.schedule_text(),
                "next_run": nxt.astimezone(dt.UTC).isoformat() if nxt else None,
                "last_result": last.status if last else None,
                "last_run": last.started if last else None,
                "last_error": last.error if last else "",
                "newest_backup": newest.get(name),
                "rpo_age_s": age,
                "rpo_objective_s": objective,
                "rpo_met": None if objective is None else (age is not None and age <= objective),
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table("set", "schedule", "next run", "last result", "rpo age / objective")
    for r in rows:
        age = "no backup" if r["rpo_age_s"] is None else format_duration(r["rpo_age_s"])
        objective = f" / {format_duration(r['rpo_objective_s'])}" if r["rpo_objective_s"] is not None else ""
        verdict = {True: " [green]ok[/]", False: " [red]BREACHED[/]", None: ""}[r["rpo_met"]]
        last = f"{r['last_result']} at {r['last_run'][:19]}" if r["last_result"] else "never run"
        if r["last_error"]:
            last += f" ({r['last_error'][:60]})"
        table.add_row(r["set"], r["schedule"], (r["next_run"] or "")[:19], last, age + objective + verdict)
    console.print(table)
