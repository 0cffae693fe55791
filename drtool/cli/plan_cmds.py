"""`drtool plan validate|show`, and `drtool restore --plan FILE [--dry-run]` / `--resume RUN`."""

from __future__ import annotations

import dataclasses
import os
import sys
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from drtool.cli.run_view import RunView, live_rows, steps_table
from drtool.cli.state import console, print_json, state
from drtool.errors import ApprovalNeeded, SourceError, UsageError

if TYPE_CHECKING:
    from drtool.plans.dryrun import PlannedStep
    from drtool.plans.loader import LoadedPlan
    from drtool.plans.results import RunResult
    from drtool.plans.schema import Plan
    from drtool.repo.manifest import Manifest
    from drtool.repo.repository import Repository

app = typer.Typer(help="Check and show restore plans (docs/plans.md).", no_args_is_help=True)

PlanArg = Annotated[Path, typer.Argument(help="A restore plan (YAML), e.g. restore-plans/full-cluster-rebuild.yaml.")]
ValuesOpt = Annotated[Path | None, typer.Option("--values", help="YAML file of variables for ${VAR} in the plan.")]
PlanOpt = Annotated[Path, typer.Option("--plan", help="The restore plan (YAML).")]


def load_checked(path: Path, values: Path | None) -> LoadedPlan:
    """A plan with every check done; invalid: a one-line error naming the first problem."""
    from drtool.plans.loader import read_values
    from drtool.plans.validate import check_file
    from drtool.plugin.manager import load_plugins

    loaded = check_file(path, load_plugins(), read_values(values))
    loaded.require()
    return loaded


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Plan files.")],
    values: ValuesOpt = None,
) -> None:
    """Check plans: schema, plugins, cycles, dangling needs, waivers, variables; each problem with its line."""
    from drtool.plans.loader import read_values
    from drtool.plans.validate import check_file
    from drtool.plugin.manager import load_plugins

    invalid = 0
    for path in files:
        loaded = check_file(path, load_plugins(), read_values(values))
        for problem in loaded.problems:
            style = "red" if problem.severity == "error" else "yellow"
            console.print(f"[{style}]{problem.render(path)}[/]", highlight=False, soft_wrap=True)
        if loaded.errors:
            invalid += 1
            continue
        plan = loaded.require()
        warnings = len(loaded.problems)
        console.print(
            f"{path}: valid — plan {plan.name}, {len(plan.steps)} steps, {len(plan.checks)} checks"
            + (f", {warnings} warning(s)" if warnings else ""),
            highlight=False,
        )
    if invalid:
        raise UsageError(f"{invalid} of {len(files)} plan(s) invalid", "fix the lines listed above")


@app.command()
def show(
    file: PlanArg,
    values: ValuesOpt = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the DAG as a picture in an HTML file.")
    ] = None,
) -> None:
    """The plan's steps as a DAG (waves that may run in parallel), objectives, checks and waivers."""
    from drtool.durations import format_duration
    from drtool.plans.dag import waves

    plan = load_checked(file, values).require()
    obj = plan.objectives
    rto = format_duration(obj.rto) if obj.rto else "-"
    rpo = format_duration(obj.rpo) if obj.rpo else "-"
    console.print(
        f"[bold]{plan.name}[/] — {plan.description or 'no description'}\n"
        f"source: {plan.source.backup if isinstance(plan.source.backup, str) else plan.source.backup.latest_before}"
        f"  objectives: RTO {rto}, RPO {rpo}"
        f"  parallelism {plan.parallelism}",
        highlight=False,
    )
    for number, wave in enumerate(waves(plan.steps), 1):
        console.print(f"wave {number}", style="bold")
        for step_id in wave:
            step = plan.step(step_id)
            flags = [f for f, on in (("optional", step.optional), ("needs approval", step.approval)) if on]
            console.print(
                f"  {step.id} ({step.uses})"
                + (f" ← {', '.join(step.needs)}" if step.needs else "")
                + (f"  [{', '.join(flags)}]" if flags else "")
                + (f"  timeout {format_duration(step.timeout)}" if step.timeout else "")
                + (f", {step.retries} retries" if step.retries else ""),
                highlight=False,
            )
    for check in plan.checks:
        console.print(f"check {check.id} ({check.type})", highlight=False)
    for waiver in plan.waivers:
        console.print(f"waiver {waiver.match}: {waiver.reason}", highlight=False)
    if html:
        from drtool.report import render_dag_svg

        name = escape(plan.name)
        html.write_text(
            f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title></head>"
            f"<body><h1>{name}</h1>{render_dag_svg(plan)}</body></html>"
        )
        console.print(f"wrote {html}")


def open_plan_repo(ctx: typer.Context, plan: Plan) -> Repository:
    """The store: --store or DRTOOL_STORE first, then the plan's ``source.store``, then the config file's."""
    app_state = state(ctx)
    if plan.source.store and not (app_state.store or os.environ.get("DRTOOL_STORE")):
        return app_state.open_repo(plan.source.store)
    return app_state.open_repo()


@dataclasses.dataclass
class Gates:
    """How `drtool restore --plan` passes approval gates (docs/plans.md, "Approvals")."""

    approve: list[str] = dataclasses.field(default_factory=list)
    approve_all: bool = False
    approver: str | None = None


def restore_with_plan(
    ctx: typer.Context,
    plan_file: Path | None,
    resume: str | None,
    backup_ref: str | None,
    values: Path | None,
    dry: bool,
    as_json: bool,
    gates: Gates | None = None,
) -> None:
    """The `drtool restore --plan/--resume` form (store_cmds.restore hands over to it)."""
    from drtool.plans.approval import Approvals, require_same_plan
    from drtool.plans.dryrun import dry_run
    from drtool.plans.executor import Executor
    from drtool.plans.notify import webhook_for
    from drtool.plans.source import find_backup

    catalog = state(ctx).open_catalog()
    previous = None
    if resume:
        from drtool.catalog.runs import RunLog

        previous = RunLog(catalog).resume_point(resume)
        plan_file, backup_ref = Path(previous.plan_path), previous.backup_id
        values = Path(previous.values_path) if previous.values_path else values
    assert plan_file is not None
    loaded = load_checked(plan_file, values)
    if previous is not None:
        require_same_plan(loaded, previous.run_id, previous.plan_sha256)
    plan = loaded.require()
    repo = open_plan_repo(ctx, plan)
    read: list[Manifest] = []  # what choosing the backup read: a step restoring a point does not read it again
    manifest = repo.find_backup(backup_ref, read) if backup_ref else find_backup(repo, plan.source, read=read)
    if dry:
        print_dry_run(plan, manifest.id, dry_run(loaded, repo, manifest), as_json)
        return
    if plan.transforms.engine():
        dry_run(loaded, repo, manifest)  # a transform rule that matches nothing stops the run before any write
    gates = gates or Gates()
    view = RunView(console, live=sys.stdout.isatty(), quiet=as_json)
    ask = view.ask if sys.stdin.isatty() else None
    approvals = Approvals(gates.approve, every=gates.approve_all, approver=gates.approver, ask=ask)
    notifier = webhook_for(plan, "restore")
    try:
        executor = Executor(
            loaded,
            repo,
            manifest,
            read=read,
            catalog=catalog,
            values_path=values,
            done_before=previous.done_before if previous else None,
            resumed_from=previous.run_id if previous else "",
            approvals=approvals,
            notifier=notifier,
            elapsed_before_s=previous.elapsed_s if previous else 0.0,
            echo=view.echo,
        )
        with view.showing(executor):
            run = executor.execute()
    finally:
        if notifier is not None:
            notifier.close()
    print_run(run, as_json)
    raise_for(run)


def raise_for(run: RunResult) -> None:
    """The run's outcome as an exit code: failed steps (7) before steps that wait for approval (11)."""
    if run.ok:
        return
    resume = f"`{run.resume_command()}`"
    if run.failed:
        failed = ", ".join(s.id for s in run.failed)
        raise SourceError(f"run {run.run_id}: step(s) {failed} failed", f"fix the cause, then {resume}")
    if run.gated:
        gated = ", ".join(s.id for s in run.gated)
        raise ApprovalNeeded(f"run {run.run_id} stopped before step(s) {gated}: approval needed", f"to go on: {resume}")
    failed = ", ".join(c.name for c in run.checks if not c.ok)
    raise SourceError(f"run {run.run_id}: check(s) {failed} failed", f"fix the cause, then {resume}")


def print_dry_run(plan: Plan, backup_id: str, planned: list[PlannedStep], as_json: bool) -> None:
    from drtool.kube.transforms import Rewrite

    if as_json:
        print_json([p.__dict__ for p in planned])
        return
    table = Table(
        "wave",
        "step",
        "plugin",
        "action",
        "artifacts",
        "target keys",
        "note",
        title=f"dry run: {plan.name} from {backup_id}",
    )
    for p in planned:
        note = p.reason or (f"unset: {', '.join(p.unset)}" if p.unset else "")
        table.add_row(str(p.wave + 1), p.id, p.uses, p.action, str(p.artifacts), ", ".join(p.target_keys), note)
    console.print(table)
    for p in planned:
        for rewrite in p.rewrites:
            console.print(
                f"transform in step {p.id}: {Rewrite(**rewrite).line()}", markup=False, highlight=False, soft_wrap=True
            )
    console.print("nothing was written; every chunk the restore needs is in the store")


def print_run(run: RunResult, as_json: bool) -> None:
    if as_json:
        print_json(
            {"run": run.run_id, "plan": run.plan.name, "backup": run.backup_id, "ok": run.ok, "status": run.status}
            | {"seconds": run.seconds, "steps": [s.to_dict() for s in run.steps.values()]}
        )
        return
    console.print(steps_table(live_rows(run, run.seconds), f"run {run.run_id}"))
    console.print(f"plan {run.plan.name}, backup {run.backup_id}: {run.status} in {run.seconds:.1f}s", highlight=False)
