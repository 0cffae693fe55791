"""`drtool drill SCENARIO` (inject, recover, judge, record) and the matrix behind `drtool drills --matrix`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drtool.cli.plan_cmds import ValuesOpt, load_checked, open_plan_repo
from drtool.cli.state import console, print_json, state
from drtool.errors import UsageError

if TYPE_CHECKING:
    from drtool.catalog.scenarios import ScenarioDrillRow


def drill(
    ctx: typer.Context,
    scenario: Annotated[str, typer.Argument(help="A runnable scenario of docs/drills.md.")],
    kubeconfig: Annotated[str, typer.Option("--kubeconfig", help="The cluster to break and recover (admin).")],
    plan: Annotated[Path | None, typer.Option("--plan", help="The restore plan (YAML); not for gpu-pool-lost.")] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context.")] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="namespace-deleted: which one; bad-write: whose ConfigMaps.")
    ] = None,
    follow_set: Annotated[str, typer.Option("--follow-set", help="bad-write: the etcd follower's set.")] = "follow",
    registry: Annotated[str | None, typer.Option("--registry", help="registry-lost: HOST:PORT wiped.")] = None,
    pool: Annotated[
        str | None, typer.Option("--pool", help="gpu-pool-lost: LOST=REMAINING flavors, e.g. l4=a100.")
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="gpu-pool-lost: NAMESPACE/LOCALQUEUE probed.")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Name a non-lab API server's host.")] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve breaking the named cluster.")] = False,
    values: ValuesOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Inject SCENARIO's failure, recover with the plan, judge by its checks, record RPO and time to service.

    Example: drtool drill kueue-config-deleted --plan restore-plans/kueue-quotas-only.yaml --kubeconfig lab.kubeconfig
    """
    from drtool.drills import guard
    from drtool.drills.kueue import KueueConfigDeleted
    from drtool.drills.namespace import NamespaceDeleted
    from drtool.drills.registry import RegistryLost
    from drtool.drills.run import Injector, allowed_target, run_drill
    from drtool.plans.source import find_backup

    target = {"kubeconfig": kubeconfig, **({"context": context} if context else {})}
    step_targets: dict[str, dict[str, str]] = {}
    if scenario == "kueue-config-deleted":
        injector: Injector = KueueConfigDeleted()
    elif scenario == "namespace-deleted":
        if not namespace:
            raise UsageError("namespace-deleted needs --namespace", "name the namespace the drill deletes")
        injector = NamespaceDeleted(namespace)
    elif scenario == "registry-lost":
        if not registry:
            raise UsageError("registry-lost needs --registry HOST:PORT", "name the registry the drill wipes")
        if not guard.is_lab(f"http://{registry}") and not approve:
            raise UsageError(f"refusing to wipe registry {registry}: not a lab", "add --approve to wipe it")
        injector, step_targets = RegistryLost(registry), {"images": {"registry": registry}}
    elif scenario == "gpu-pool-lost":
        allowed_target(target, cluster, approve)
        _print_row(_gpu_pool(ctx, target, pool, queue, cluster, approve), as_json)
        return
    elif scenario == "bad-write":
        allowed_target(target, cluster, approve)
        _print_row(_bad_write(ctx, target, plan, values, namespace, follow_set, cluster, approve), as_json)
        return
    else:
        raise UsageError(f"no injector for scenario {scenario!r}", f"runnable: {', '.join(runnable())}")
    allowed_target(target, cluster, approve)  # before the store or the plan is even read
    if plan is None:
        raise UsageError(f"{scenario} needs --plan", "the restore plan that recovers it (docs/drills.md)")
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
        step_targets=step_targets,
    )
    _print_row(row, as_json)


def runnable() -> list[str]:
    from drtool.drills.scenarios import SCENARIOS

    return [name for name, s in SCENARIOS.items() if s.runnable and name != "whole-cluster-lost"]


def _gpu_pool(
    ctx: typer.Context,
    target: dict[str, str],
    pool: str | None,
    queue: str | None,
    cluster: str | None,
    approve: bool,
) -> ScenarioDrillRow:
    """gpu-pool-lost restores nothing: no plan, no store; Kueue admitting elsewhere is the recovery."""
    from drtool.drills.gpu_pool import GpuPoolLost, drill_gpu_pool_lost

    lost, _, remaining = (pool or "").partition("=")
    namespace, _, local_queue = (queue or "").partition("/")
    if not (lost and remaining and namespace and local_queue):
        raise UsageError(
            "gpu-pool-lost needs --pool LOST=REMAINING and --queue NAMESPACE/LOCALQUEUE",
            "e.g. --pool l4=a100 --queue team-speech/speech-queue",
        )
    injector = GpuPoolLost(lost, remaining, namespace, local_queue)
    return drill_gpu_pool_lost(injector, target, state(ctx).open_catalog(), named=cluster, approved=approve)


def _bad_write(
    ctx: typer.Context,
    target: dict[str, str],
    plan: Path | None,
    values: Path | None,
    namespace: str | None,
    follow_set: str,
    cluster: str | None,
    approve: bool,
) -> ScenarioDrillRow:
    """bad-write: the plan is loaded with AT = now, the point its etcd step restores, just before the delete."""
    import time

    from drtool.drills.bad_write import BadWrite
    from drtool.drills.run import run_drill
    from drtool.plans.loader import read_values
    from drtool.plans.source import find_backup
    from drtool.plans.validate import check_file
    from drtool.plugin.manager import load_plugins

    if not namespace or plan is None:
        raise UsageError("bad-write needs --namespace and --plan", "e.g. --plan restore-plans/bad-write-pitr.yaml")
    at = time.time()
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    loaded = check_file(plan, load_plugins(), read_values(values) | {"AT": stamp})
    etcd = dict(loaded.require().target.get("etcd") or {})
    if not etcd.get("data_dir"):
        raise UsageError(f"plan {plan} restores no etcd member", "use restore-plans/bad-write-pitr.yaml")
    repo = open_plan_repo(ctx, loaded.require())
    manifest = find_backup(repo, loaded.require().source)
    injector = BadWrite(namespace, repo, str(etcd["data_dir"]), backup_set=follow_set)
    catalog = state(ctx).open_catalog()
    return run_drill(injector, target, loaded, repo, manifest, catalog, named=cluster, approved=approve,
                     step_targets={"etcd": etcd}, recovery_point=at)  # fmt: skip


def _print_row(row: ScenarioDrillRow, as_json: bool) -> None:
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
