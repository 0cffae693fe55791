"""`drtool audit`: the go-live checklist graded against a live cluster, the plans, the checkpoints and the
catalog's drill records; exits 12 (``AuditFailed``) when an item fails, so CI or a schedule can gate on it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drtool.cli.state import console, print_json, state
from drtool.errors import AuditFailed

if TYPE_CHECKING:
    from drtool.independence.analysis import IndependenceReport


def audit(
    ctx: typer.Context,
    kubeconfig: Annotated[
        str | None, typer.Option("--kubeconfig", help="Read-only is enough (default: KUBECONFIG).")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context.")] = None,
    namespace: Annotated[list[str] | None, typer.Option("--namespace", "-n", help="Only these namespaces.")] = None,
    plans: Annotated[list[Path] | None, typer.Option("--plans", help="Restore plan files (objectives).")] = None,
    independence_plan: Annotated[
        Path | None,
        typer.Option(
            "--independence-plan", help="Analyse this plan's latest backup now instead of reading the drills' verdicts."
        ),
    ] = None,
    drill_period: Annotated[str, typer.Option("--drill-period", help="How old the latest drill may be.")] = "30d",
    out: Annotated[Path | None, typer.Option("--out", help="Folder for audit.json and audit.html.")] = None,
    metrics: Annotated[Path | None, typer.Option("--metrics", help="Prometheus textfile to write.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Grade each go-live checklist item pass / fail / unknown with its evidence; exit 12 on a fail.

    Example: drtool --store s3://dr/store audit --plans restore-plans/training-resume.yaml --out r/
    """
    from drtool.audit import output
    from drtool.audit.cluster import read_cluster
    from drtool.audit.scorecard import AuditInputs, run_audit
    from drtool.catalog.runs import RunLog
    from drtool.catalog.scenarios import ScenarioLog
    from drtool.cli.plan_cmds import load_checked
    from drtool.durations import parse_duration
    from drtool.kube.settings import Connection

    app_state = state(ctx)
    catalog = app_state.open_catalog()
    loaded = [load_checked(p, None).require() for p in plans or []]
    inputs = AuditInputs(
        cluster=read_cluster(Connection(kubeconfig=kubeconfig, context=context), namespace or ()),
        plans=loaded,
        sets=app_state.settings.backup_sets,
        drills=RunLog(catalog).drills(),
        scenario_drills=ScenarioLog(catalog).all(),
        store=app_state.open_repo() if app_state.settings.store else None,
        independence=_independence(ctx, independence_plan) if independence_plan else None,
        drill_period=parse_duration(drill_period),
    )
    card = run_audit(inputs)
    if as_json:
        print_json(card.to_dict())
    else:
        console.print(output.table(card))
    for fmt, path in output.write(card, out, metrics).items():
        console.print(f"{fmt:>7}: {path}", highlight=False)
    if card.verdict == "fail":
        failed = [g.item for g in card.grades if g.status == "fail"]
        raise AuditFailed(f"{len(failed)} checklist item(s) fail: {', '.join(failed)}", "the evidence says why")


def _independence(ctx: typer.Context, plan_file: Path) -> IndependenceReport:
    from drtool.cli.plan_cmds import load_checked, open_plan_repo
    from drtool.independence.analysis import analyze
    from drtool.plans.source import find_backup
    from drtool.plans.steps import step_target

    plan = load_checked(plan_file, None).require()
    repo = open_plan_repo(ctx, plan)
    return analyze(plan, repo, find_backup(repo, plan.source), {s.id: step_target(plan, s) for s in plan.steps})


def register(app: typer.Typer) -> None:
    app.command()(audit)
