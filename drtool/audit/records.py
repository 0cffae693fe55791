"""The checklist items the plans, the backup sets and the catalog's drill records answer: objectives per workload class,
recovery independence as drills measured it, and drills within their period.

Drill records are the catalog's ``DrillRow``s (``RunLog.drills()``), oldest first; plans are loaded plans.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from drtool.catalog.runs import DrillRow
from drtool.catalog.scenarios import ScenarioDrillRow
from drtool.durations import format_duration
from drtool.independence.analysis import IndependenceReport
from drtool.plans.schema import Plan
from drtool.scheduler.sets import BackupSet

from .grades import Grade, Status, worst

CLASSES = ("training", "inference")


def _latest_per_plan(drills: Sequence[DrillRow]) -> dict[str, DrillRow]:
    return {d.plan_name: d for d in sorted(drills, key=lambda d: d.started)}


def objectives(plans: Sequence[Plan], drills: Sequence[DrillRow], sets: Mapping[str, BackupSet] | None = None) -> Grade:
    """Training and inference each have both objectives — a plan's rto and rpo, or a plan's rto and a backup
    set's rpo of the same class — and each such plan's latest drill met them."""
    title = "RPO/RTO are defined separately for training and inference, and the latest drills meet them"
    sets = sets or {}
    if not plans:
        return Grade("objectives", title, "unknown", ["no plans given (--plans)"])
    evidence: list[str] = []
    statuses: list[Status] = []
    latest = _latest_per_plan(drills)
    for cls in CLASSES:
        set_rpo = {name: s.rpo for name, s in sorted(sets.items()) if s.workload == cls and s.rpo}
        own = [p for p in plans if p.objectives.workload == cls and p.objectives.rto and (p.objectives.rpo or set_rpo)]
        statuses.append("pass" if own else "fail")
        evidence.append(
            f"{cls}: "
            + (
                ", ".join(p.name for p in own)
                if own
                else f"no plan with `objectives.workload: {cls}` and both rto and rpo"
            )
        )
        if set_rpo:
            evidence.append(
                f"{cls} backup sets: " + ", ".join(f"{n} (rpo {format_duration(r)})" for n, r in set_rpo.items())
            )
        for plan in own:
            drill = latest.get(plan.name)
            if drill is None:
                statuses.append("unknown")
                evidence.append(f"{plan.name}: never drilled")
            else:
                met = drill.rto_met is not False and drill.rpo_met is not False
                statuses.append("pass" if met else "fail")
                evidence.append(
                    f"{plan.name}: drill {drill.started[:19]} RTO {format_duration(drill.rto_s)}"
                    + ("" if drill.rpo_s is None else f", RPO {format_duration(drill.rpo_s)}")
                    + (" met the objectives" if met else " missed the objectives")
                )
    unclassed = [p.name for p in plans if p.objectives.workload is None and (p.objectives.rto or p.objectives.rpo)]
    unclassed += [f"backup set {n}" for n, s in sorted(sets.items()) if s.workload is None and s.rpo]
    if unclassed:
        evidence.append(f"objectives without a workload class: {', '.join(unclassed)}")
    return Grade("objectives", title, worst(statuses), evidence)


def independence(drills: Sequence[DrillRow], report: IndependenceReport | None = None) -> Grade:
    """The independence analysis' verdict: a fresh one when given, else each plan's latest drill's."""
    title = "Images, models, configuration and secrets recovery does not depend on the cluster"
    if report is not None:
        counts = report.counts()
        verdict = report.verdict
        evidence = [
            f"plan {report.plan}, backup {report.backup_id}: {verdict} "
            f"({counts['inside']} inside the failure domain, {counts['unknown']} unknown)"
        ]
        evidence += [f"inside: {f.address} ({f.purpose})" for f in report.failing]
        return Grade("independence", title, _status(verdict), evidence)
    latest = [d for d in _latest_per_plan(drills).values() if d.independence not in ("", "not analysed")]
    if not latest:
        return Grade("independence", title, "unknown", ["no analysed drill and no --independence-plan"])
    evidence = [f"{d.plan_name}: drill {d.started[:19]} independence {d.independence}" for d in latest]
    return Grade("independence", title, worst(_status(d.independence) for d in latest), evidence)


def _status(verdict: str) -> Status:
    return "pass" if verdict == "pass" else "fail" if verdict == "fail" else "unknown"


def drills_recent(
    drills: Sequence[DrillRow],
    period: dt.timedelta,
    now: dt.datetime | None = None,
    scenarios: Sequence[ScenarioDrillRow] = (),
) -> Grade:
    """Every drilled plan's and scenario's latest drill is younger than ``period`` and succeeded."""
    title = "Failure drills are performed regularly and actual RPO/RTO is recorded"
    now = now or dt.datetime.now(dt.UTC)
    latest = {f"plan {name}": (d.started, d.ok) for name, d in _latest_per_plan(drills).items()}
    for s in sorted(scenarios, key=lambda s: s.injected_at):
        latest[f"scenario {s.scenario}"] = (s.injected_at, s.ok)
    if not latest:
        return Grade("drills-recent", title, "fail", ["no drill recorded in the catalog"])
    evidence: list[str] = []
    statuses: list[Status] = []
    for name, (started, ok) in sorted(latest.items()):
        age = now - _when(started)
        fresh = age <= period
        statuses.append("pass" if fresh and ok else "fail")
        overdue = "" if fresh else f", over the period of {format_duration(period.total_seconds())}"
        evidence.append(
            f"{name}: last drill {format_duration(age.total_seconds())} ago ({'ok' if ok else 'failed'}){overdue}"
        )
    return Grade("drills-recent", title, worst(statuses), evidence)


def _when(stamp: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
