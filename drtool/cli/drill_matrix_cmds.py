"""`drtool drill SCENARIO` (inject, recover, judge, record) and the matrix behind `drtool drills --matrix`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer

from drtool.cli.plan_cmds import PlanOpt, ValuesOpt, load_checked, open_plan_repo
from drtool.cli.state import console, print_json, state
from drtool.errors import UsageError


def drill(
    ctx: typer.Context,
    scenario: Annotated[str, typer.Argument(help="kueue-config-deleted or namespace-deleted (docs/drills.md).")],
    plan: PlanOpt,
    kubeconfig: Annotated[str, typer.Option("--kubeconfig", help="The cluster to break and recover (admin).")],
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="namespace-deleted: which one.")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Name a non-lab API server's host.")] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve breaking the named cluster.")] = False,
    values: ValuesOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Inject SCENARIO's failure, recover with the plan, judge by its checks, record RPO and time to service.

    Example: drtool drill kueue-config-deleted --plan restore-plans/kueue-quotas-only.yaml --kubeconfig lab.kubeconfig
    """
    from drtool.drills.kueue import KueueConfigDeleted
    from drtool.drills.namespace import NamespaceDeleted
    from drtool.drills.run import Injector, allowed_target, run_drill
    from drtool.plans.source import find_backup

    if scenario == "kueue-config-deleted":
        injector: Injector = KueueConfigDeleted()
    elif scenario == "namespace-deleted":
        if not namespace:
            raise UsageError("namespace-deleted needs --namespace", "name the namespace the drill deletes")
        injector = NamespaceDeleted(namespace)
    else:
        raise UsageError(f"no injector for scenario {scenario!r}", "runnable: kueue-config-deleted, namespace-deleted")
    target = {"kubeconfig": kubeconfig, **({"context": context} if context else {})}
    allowed_target(target, cluster, approve)  # before the store or the plan is even read
    loaded = load_checked(plan, values)
    repo = open_plan_repo(ctx, loaded.require())
    manifest = find_backup(repo, loaded.require().source)
    row = run_drill(
        injector,
        target,
        loaded,
        repo,
        manifest,
        state(ctx).open_catalog(),
        named=cluster,
        approved=approve,
    )
    if as_json:
        print_json(row.to_dict())
    else:
        console.print(
            f"drill {row.id}: {row.scenario} {'ok' if row.ok else 'FAILED'}; RPO {row.rpo_s}s, "
            f"time to service {row.time_to_service_s}s",
            highlight=False,
        )
    if not row.ok:
        raise UsageError(f"drill {row.id} did not recover: {row.error or 'a check failed'}")


def matrix(ctx: typer.Context, as_json: bool, out: Path | None, metrics: Path | None) -> None:
    """The scenarios against their latest drills; the library builds it, this prints and writes it."""
    from prometheus_client import write_to_textfile

    from drtool.catalog.runs import RunLog
    from drtool.catalog.scenarios import ScenarioLog
    from drtool.drills import matrix as drill_matrix
    from drtool.report.render import write_atomic

    catalog = state(ctx).open_catalog()
    rows = drill_matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())
    if as_json:
        print_json(rows)
    else:
        console.print(drill_matrix.table(rows))
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        if out:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(out / "drills.json", json.dumps(rows, indent=2) + "\n")
            write_atomic(out / "drills.html", drill_matrix.to_html(rows, generated))
        if metrics:
            write_to_textfile(str(metrics), drill_matrix.registry(rows))
    except OSError as exc:
        raise UsageError(f"cannot write the matrix: {exc.strerror} ({exc.filename})", "choose another path") from None
