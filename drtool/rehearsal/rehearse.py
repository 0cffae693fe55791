"""`drtool rehearse`: restore a plan into a fresh target with the source unreachable, and measure it.

The order matters. The isolation is entered first (isolation.py: by default a network namespace, which the
target is then started in), then the target is provisioned while the source still runs (by a target
provider, target.py: a fresh lab by default; or an existing cluster named by its kubeconfig), then the
source is made unreachable — a lab source is stopped, and a network guard refuses every connection into
the backup's failure domain — and the clock starts: RTO is the wall time from there to service restored,
every check green (service.py: restore steps done and time to service, broken down by step and check).
RPO is the age of the restored state: the failure time (now, or ``failure_time``)
minus the time each plugin's backup finished. The drill is recorded in the catalog and the report is
written through drtool.report (JSON, Markdown, HTML).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drtool.independence.analysis import analyze
from drtool.independence.domain import FailureDomain
from drtool.plans.approval import Approvals
from drtool.plans.executor import Executor, RunNotifier
from drtool.plans.loader import LoadedPlan
from drtool.plans.results import RunResult
from drtool.plans.schema import Plan
from drtool.plans.source import find_backup
from drtool.plans.steps import skip_reason, step_target
from drtool.plans.validate import ensure_valid
from drtool.plugin.contract import Plugin
from drtool.plugin.manager import load_plugins
from drtool.progress import Progress
from drtool.rehearsal.agreement import bug_pairs
from drtool.rehearsal.guard import NetworkGuard
from drtool.rehearsal.isolation import AUTO, isolate
from drtool.rehearsal.service import recovery_times, training_points
from drtool.rehearsal.target import (
    DEFAULT,
    RehearsalSource,
    Target,
    is_cluster,
    kubeconfig_target,
    provider,
    reachable_endpoints,
)
from drtool.repo.manifest import Manifest, utc_now
from drtool.repo.repository import Repository
from drtool.report import write_report

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog

Echo = Callable[[str], None]


@dataclasses.dataclass
class Rehearsal:
    restored: bool  # every step ok or skipped, every check passed, objectives met, nothing refused
    report: dict[str, Any]
    paths: dict[str, Path]
    run: RunResult
    phases: dict[str, float]  # seconds: plan_s, provision_s, restore_s, analysis_s, report_s

    @property
    def independent(self) -> bool:
        """The static analysis found nothing needed inside the failure domain (waivers aside)."""
        return (self.report.get("independence") or {}).get("verdict") != "fail"

    @property
    def ok(self) -> bool:
        return self.restored and self.independent


@dataclasses.dataclass
class RehearsalOptions:
    backup: str | None = None  # a backup reference overriding the plan's source
    target: str = DEFAULT  # a target provider's name (drtool.rehearsal.target: "lab") or a kubeconfig path
    keep: bool = False  # leave the target running
    source: RehearsalSource | None = None  # stopped for the rehearsal (and started again unless source_stays_down)
    source_stays_down: bool = False
    failure_time: dt.datetime | None = None  # default: when the source was made unreachable
    out_dir: Path = Path("drtool-reports")
    labs_root: Path | None = None  # where a provider keeps the fresh target it makes (a lab's folder)
    isolation: str = AUTO  # auto | netns | in-process (drtool.rehearsal.isolation)
    # plugin -> why the caller left it out (`drtool demo` without that plugin's lab): its steps are skipped with
    # that reason, and so are the checks that read what they restore; the rehearsal does not fail on them
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def source_domain(manifest: Manifest, source: RehearsalSource | None) -> FailureDomain:
    """The backup's failure domain, plus every endpoint of a running source (plugins record what they know;
    a lab knows every server it runs)."""
    facts = {k: list(v) if isinstance(v, list) else v for k, v in manifest.failure_domain.items()}
    evidence: dict[str, str] = {}
    if source is not None:
        facts["lab_source_endpoints"] = source.endpoints()
        evidence["lab_source_endpoints"] = f"ports of lab {source.name}"
    base = FailureDomain.from_manifest(manifest)
    return FailureDomain(facts, {**base.evidence, **evidence})


def rpo(
    manifest: Manifest, plugins: list[str], failure_time: dt.datetime, points: dict[str, str] | None = None
) -> dict[str, float]:
    """Seconds of state lost per plugin: failure time minus when that plugin's backup finished, or minus the
    recovery point its restore reported (a point-in-time restore from deltas: the newest replayed change)."""
    points = points or {}
    return {
        name: round(
            (failure_time - _parse_time(points.get(name) or manifest.plugins[name].finished)).total_seconds(), 3
        )
        for name in plugins
        if name in manifest.plugins
    }


def _independence(
    plan: Plan, repo: Repository, manifest: Manifest, target: Target, left_out: dict[str, str]
) -> dict[str, Any]:
    """The static independence analysis of the plan against the targets the rehearsal really used."""
    targets = {s.id: step_target(plan, s, target.overrides) for s in plan.steps}
    return analyze(plan, repo, manifest, targets, left_out=left_out).to_dict()


def rehearse(
    loaded: LoadedPlan,
    repo: Repository,
    options: RehearsalOptions,
    *,
    catalog: Catalog | None = None,
    notifier: RunNotifier | None = None,
    echo: Echo = lambda _line: None,
    progress: Progress | None = None,
) -> Rehearsal:
    phases: dict[str, float] = {}  # drtool's own time (plan, analysis, report) next to the restore's
    clock = time.monotonic()
    plan = ensure_valid(loaded)
    provision = _provisioner(options)  # no provider for the target: one line, before anything is read or started
    read: list[Manifest] = []  # each manifest read once: passed by value from here on
    manifest = find_backup(repo, plan.source, options.backup, read)
    backup_id = manifest.id
    installed = load_plugins()
    left_out = options.left_out
    running = [(s, installed[s.uses]) for s in plan.steps if skip_reason(s, manifest, installed, left_out) is None]
    plugins = list({p.name: p for _, p in running}.values())
    domain = source_domain(manifest, options.source)
    phases["plan_s"], clock = time.monotonic() - clock, time.monotonic()
    echo(f"rehearsing plan {plan.name} from backup {backup_id} into {options.target}")
    guard = NetworkGuard(domain.is_inside)
    allowed = reachable_endpoints(repo, catalog, options.target, plan, manifest, running)
    target: Target | None = None
    source_stopped = False
    try:
        with isolate(options.isolation, domain, guard, allowed, keep=options.keep) as isolation:
            echo(f"isolation: {isolation.mode} ({isolation.why})")
            target = provision(plugins)
            phases["provision_s"] = time.monotonic() - clock
            echo(f"target {target.description} ready in {phases['provision_s']:.1f}s")
            if options.source is not None:
                options.source.stop()
                source_stopped = True
                echo(f"source {options.source.name} stopped: it stays unreachable for the rehearsal")
            failure_time = options.failure_time or dt.datetime.now(dt.UTC)
            started = time.monotonic()
            with guard:
                executor = Executor(
                    loaded,
                    repo,
                    manifest,
                    read=read,
                    overrides=target.overrides,
                    catalog=catalog,
                    kind="rehearsal",
                    approvals=Approvals.automatic("rehearsal"),  # a scratch target: the report says so
                    watcher=guard,
                    notifier=notifier,
                    echo=echo,
                    progress=progress,
                    left_out=options.left_out,
                )
                offset_s = time.monotonic() - started  # the run's clock starts as the executor is made
                run = executor.execute()
                verified_s = time.monotonic() - started
        times = recovery_times(run, offset_s, verified_s)
        outside_steps = [r.to_dict() for r in guard.refused if not r.steps]  # the namespace's witness has drained
        phases["restore_s"], clock = verified_s, time.monotonic()
        independence = _independence(plan, repo, manifest, target, options.left_out)
        phases["analysis_s"], clock = time.monotonic() - clock, time.monotonic()
        report = build_report(loaded, manifest, run, target, failure_time, times, phases, outside_steps)
        report["independence"] = independence
        report["run"]["isolation"] = isolation.to_dict()
        report["run"]["bug_pairs"] = bug_pairs(guard.refused, independence)
        paths = write_report(report, options.out_dir, f"rehearsal-{plan.name}-{run.run_id}")
        phases["report_s"] = time.monotonic() - clock
        result = Rehearsal(_restored(report), report, paths, run, phases)
        if catalog is not None:
            from drtool.catalog.recorder import record_drill  # SQLAlchemy loads only when there is a catalog

            record_drill(catalog, report, paths, result.restored)  # independence has its own column
        echo(f"report: {paths['html']}")
        return result
    finally:
        if target is not None and not options.keep:
            target.teardown()
        if options.source is not None and source_stopped and not options.source_stays_down:
            options.source.start()


def _provisioner(options: RehearsalOptions) -> Callable[[list[Plugin]], Target]:
    """How the target is made: an existing cluster by its kubeconfig, or a fresh one by the named provider."""
    if is_cluster(options.target):
        return lambda plugins: kubeconfig_target(options.target, plugins)
    chosen = provider(options.target)
    return lambda plugins: chosen.provision(plugins, options.labs_root)


def build_report(
    loaded: LoadedPlan,
    manifest: Manifest,
    run: RunResult,
    target: Target,
    failure_time: dt.datetime,
    times: dict[str, float | None],
    phases: dict[str, float],
    refused_outside_steps: list[dict[str, Any]],
) -> dict[str, Any]:
    """The report dict drtool.report renders (its shape is documented in docs/rehearsal.md)."""
    plan = run.plan
    ran = [s.uses for s in run.steps.values() if s.status == "ok"]
    points = {s.uses: s.recovery_point for s in run.steps.values() if s.status == "ok" and s.recovery_point}
    per_plugin = rpo(manifest, list(dict.fromkeys(ran)), failure_time, points)
    rpo_s = max(per_plugin.values()) if per_plugin else None
    rto_objective = plan.objectives.rto.total_seconds() if plan.objectives.rto else None
    rpo_objective = plan.objectives.rpo.total_seconds() if plan.objectives.rpo else None
    rto_s = times["service_s"] if times["service_s"] is not None else times["confirmed_s"]
    checks = [
        {"step": s.id, "name": c.name, "ok": c.ok, "detail": c.detail} for s in run.steps.values() for c in s.checks
    ]
    checks += [{"step": "plan", **dataclasses.asdict(c)} for c in run.checks]
    return {
        "kind": "rehearsal",
        "plan": {"name": plan.name, "path": str(loaded.path)},
        "backup": {"id": manifest.id, "created": manifest.finished},
        "independence": None,
        "run": {
            "id": run.run_id,
            "started": run.started,
            "finished": utc_now(),
            "target": target.description,
            "phases_s": {k: round(v, 3) for k, v in phases.items()},
            "steps": [s.to_dict() for s in run.steps.values()],
            "refused_outside_steps": refused_outside_steps,
            "left_out": {"plugins": run.left_out, "checks": run.checks_left_out},
            "rto": {  # to service: every check green (drtool/rehearsal/service.py)
                "measured_s": rto_s,
                "objective_s": rto_objective,
                "met": None if rto_objective is None else run.ok and rto_s is not None and rto_s <= rto_objective,
                **times,
            },
            "training": training_points(run, failure_time),
            "rpo": {
                "per_plugin": per_plugin,
                "measured_s": rpo_s,
                "objective_s": rpo_objective,
                "met": None if rpo_objective is None or rpo_s is None else rpo_s <= rpo_objective,
                "failure_time": failure_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        },
        "checks": checks,
    }


def _restored(report: dict[str, Any]) -> bool:
    run = report["run"]
    steps_ok = all(s["status"] in ("ok", "skipped") for s in run["steps"])
    checks_ok = all(c["ok"] for c in report["checks"])
    objectives_ok = run["rto"]["met"] is not False and run["rpo"]["met"] is not False
    return steps_ok and checks_ok and objectives_ok and not run["refused_outside_steps"]
