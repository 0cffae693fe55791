"""`drtool standby`, `drtool failover`, `drtool failback`: a warm standby kept from the store (docs/standby.md)."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drtool.cli.plan_cmds import load_checked
from drtool.cli.state import AppState, console, print_json, state
from drtool.errors import ApprovalNeeded, UsageError

if TYPE_CHECKING:
    from drtool.standby.failover import FailoverResult
    from drtool.standby.hydrate import Standby

SetOpt = Annotated[str, typer.Option("--set", help="The backup set the standby follows.")]
TargetOpt = Annotated[Path, typer.Option("--target", help="Kubeconfig of the standby cluster.")]
PluginsOpt = Annotated[
    list[str] | None, typer.Option("--plugin", "-p", help="The set's plugins (default: the config's set).")
]
DeleteAfterOpt = Annotated[
    str, typer.Option("--delete-after", help="Hold deletions seen on the primary this long (`0`: apply at once).")
]
ApproveOpt = Annotated[bool, typer.Option("--approve", help="Approve taking service over (required).")]
PlanOpt = Annotated[Path | None, typer.Option("--plan", help="A restore plan whose checks say service is back.")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="Write the HTML report here.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def standby(
    ctx: typer.Context,
    backup_set: SetOpt,
    target: TargetOpt,
    plugin: PluginsOpt = None,
    delete_after: DeleteAfterOpt = "1h",
    once: Annotated[bool, typer.Option("--once", help="Catch up once and exit.")] = False,
    interval: Annotated[float, typer.Option(help="Seconds between reads of the store.")] = 5.0,
    metrics_address: Annotated[
        str | None, typer.Option("--metrics-address", help="Serve Prometheus metrics on HOST:PORT.")
    ] = None,
) -> None:
    """Keep TARGET hydrated from the set's chain links in the store, workloads held, until SIGTERM.

    Example: drtool standby --set prod --target standby.kubeconfig --delete-after 2h"""
    from drtool.standby.hydrate import Round

    app = state(ctx)
    hydrator = _standby(app, backup_set, target, plugin, delete_after)
    if metrics_address:
        hydrator.metrics.serve(metrics_address)

    def show(done: Round) -> None:
        lag = "no link applied yet" if done.lag_s is None else f"lag {done.lag_s:.1f} s"
        console.print(
            f"[bold]{backup_set}[/]: {len(done.applied)} link(s) applied, {len(done.skipped)} skipped, "
            f"{done.deferred} deletion(s) held, {lag}",
            highlight=False,
        )

    if once:
        show(hydrator.round())
        return
    stop = threading.Event()
    _stop_on_signals(stop)
    hydrator.run(interval, stop, show)


def failover(
    ctx: typer.Context,
    backup_set: SetOpt,
    target: TargetOpt,
    approve: ApproveOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Fail over although the primary answers.")] = False,
    plugin: PluginsOpt = None,
    plan: PlanOpt = None,
    primary: Annotated[
        list[str] | None, typer.Option("--primary", help="The primary's API server (default: from its backups).")
    ] = None,
    failed_at: Annotated[str | None, typer.Option("--failed-at", help="When the primary failed (RPO).")] = None,
    delete_after: DeleteAfterOpt = "1h",
    report: ReportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fence the primary, apply the last link, release what the standby holds, run the checks; RPO and RTO.

    Example: drtool failover --set prod --target standby.kubeconfig --approve --plan plans/prod.yaml"""
    from drtool.points import parse_time
    from drtool.standby.failover import failover as run_failover

    app = state(ctx)
    _approved(approve, "failover")
    hydrator = _standby(app, backup_set, target, plugin, delete_after)
    loaded = load_checked(plan, None).require() if plan else None
    result = run_failover(
        hydrator.repo,
        hydrator,
        plan=loaded,
        force=force,
        failed_at=parse_time(failed_at) if failed_at else None,
        primary=primary or (),
        on_event=lambda line: console.print(line, highlight=False),
    )
    _finish(app, result, "failover", report, as_json)


def failback(
    ctx: typer.Context,
    backup_set: SetOpt,
    target: TargetOpt,
    approve: ApproveOpt = False,
    lift: Annotated[str | None, typer.Option("--lift", help="The old set whose fence to lift afterwards.")] = None,
    drain: Annotated[float, typer.Option("--drain", help="Seconds to keep applying links before the fence.")] = 10.0,
    plugin: PluginsOpt = None,
    plan: PlanOpt = None,
    delete_after: DeleteAfterOpt = "1h",
    report: ReportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Planned failback: TARGET (the rebuilt old site) hydrates from the current primary's set; move service
    back once the application there is quiesced and its followers drained (--drain), with the same checks.

    Example: drtool failback --set prod-b --target old-site.kubeconfig --lift prod --approve"""
    from drtool.standby.failover import failback as run_failback

    app = state(ctx)
    _approved(approve, "failback")
    hydrator = _standby(app, backup_set, target, plugin, delete_after)
    loaded = load_checked(plan, None).require() if plan else None
    result = run_failback(
        hydrator.repo,
        hydrator,
        lift=lift,
        plan=loaded,
        drain_s=drain,
        on_event=lambda line: console.print(line, highlight=False),
    )
    _finish(app, result, "failback", report, as_json)


# --- shared -----------------------------------------------------------------------------------------


def _standby(app: AppState, backup_set: str, target: Path, plugins: list[str] | None, delete_after: str) -> Standby:
    from drtool.durations import parse_duration
    from drtool.plugin.manager import get_plugin
    from drtool.standby.hydrate import Standby, standby_plugins
    from drtool.standby.state import StateStore

    if not target.is_file():
        raise UsageError(f"no kubeconfig at {target}", "--target names the standby cluster's kubeconfig file")
    chosen = standby_plugins([get_plugin(n) for n in plugins or _set_plugins(app, backup_set)])
    hold = parse_duration(delete_after)
    repo = app.open_repo()
    return Standby(
        repo,
        backup_set,
        chosen,
        {"kubeconfig": str(target)},
        StateStore(str(target), backup_set),
        delete_after=hold.total_seconds(),
        on_event=lambda line: console.print(line, highlight=False),
    )


def _set_plugins(app: AppState, backup_set: str) -> list[str]:
    bset = app.settings.backup_sets.get(backup_set)
    if bset is None:
        raise UsageError(
            f"no backup set {backup_set!r} in the config to take its plugins from",
            "name them with -p (e.g. -p kubernetes -p kueue)",
        )
    return list(bset.plugins)


def _approved(approve: bool, what: str) -> None:
    if not approve:
        raise ApprovalNeeded(
            f"a {what} takes service over and fences a backup set", f"pass --approve to run the {what}"
        )


def _finish(app: AppState, result: FailoverResult, kind: str, report: Path | None, as_json: bool) -> None:
    from drtool.catalog.runs import FailoverRow, RunLog
    from drtool.durations import format_duration
    from drtool.standby.report import html_report

    data = result.to_json()
    if report is not None:
        report.write_text(html_report(data, kind))
    RunLog(app.open_catalog()).save(
        FailoverRow(
            id=f"{result.backup_set}-{result.started}",
            started=result.started,
            backup_set=result.backup_set,
            kind=kind,
            forced=result.forced,
            ok=result.ok,
            rpo_s=result.rpo_s,
            rto_s=result.rto_s,
            report=str(report or ""),
        )
    )
    if as_json:
        print_json(data)
    else:
        rpo = "unknown" if result.rpo_s is None else format_duration(dt.timedelta(seconds=result.rpo_s))
        console.print(
            f"{kind} of {result.backup_set}: {'service restored' if result.ok else '[red]checks failed[/]'}, "
            f"RPO {rpo}, RTO {result.rto_s:.1f} s",
            highlight=False,
        )
        for run, step in result.resume_steps.items():
            console.print(
                f"training run {run} resumes from step {step}, its newest complete checkpoint", highlight=False
            )
        for line in result.left:
            console.print(f"left: {line}", highlight=False)
    if not result.ok:
        raise typer.Exit(1)


def _stop_on_signals(stop: threading.Event) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())


def register(app: typer.Typer) -> None:
    app.command()(standby)
    app.command()(failover)
    app.command()(failback)
