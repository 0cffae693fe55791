"""`drtool audit`'s items from plans and drill records: objectives per workload class, independence, drills.

Drill records go through a real catalog (SQLite in the test's folder) and come back as ``RunLog.drills()``
returns them, so a column the grading reads that the catalog does not keep would fail here.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from drtool.audit.records import drills_recent, independence, objectives
from drtool.catalog import Catalog
from drtool.catalog.runs import DrillRow, RunLog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.plans.schema import Plan

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def plan(name: str, **objectives: Any) -> Plan:
    return Plan.model_validate({"name": name, "objectives": objectives, "steps": [{"id": "k", "uses": "kubernetes"}]})


def drill(plan_name: str, days_ago: float, **fields: Any) -> DrillRow:
    started = (NOW - dt.timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    row = {
        "id": f"{plan_name}-{days_ago}",
        "started": started,
        "plan_name": plan_name,
        "backup_id": "b1",
        "target": "lab",
        "ok": True,
        "rto_s": 44.0,
        "rto_met": True,
        "rpo_met": True,
    } | fields
    return DrillRow(**row)


def recorded(tmp_path: Path, *rows: DrillRow) -> list[DrillRow]:
    log = RunLog(Catalog(str(tmp_path / "catalog.db")))
    log.save(*rows)
    return log.drills()


TRAINING = plan("training-resume", workload="training", rto="2h", rpo="30m")
INFERENCE = plan("serving-rebuild", workload="inference", rto="15m", rpo="1h")


def test_objectives_pass_for_both_classes_with_drills_that_met_them(tmp_path: Path) -> None:
    rows = recorded(tmp_path, drill("training-resume", 1), drill("serving-rebuild", 2))
    grade = objectives([TRAINING, INFERENCE], rows)
    assert grade.status == "pass", grade.evidence
    assert "training: training-resume" in grade.evidence and "inference: serving-rebuild" in grade.evidence


def test_objectives_fail_without_an_inference_class(tmp_path: Path) -> None:
    unclassed = plan("full-cluster-rebuild", rto="1h", rpo="15m")
    grade = objectives([TRAINING, unclassed], recorded(tmp_path, drill("training-resume", 1)))
    assert grade.status == "fail"
    assert "inference: no plan with `objectives.workload: inference` and both rto and rpo" in grade.evidence
    assert "objectives without a workload class: full-cluster-rebuild" in grade.evidence


def test_objectives_fail_when_the_latest_drill_missed_them(tmp_path: Path) -> None:
    rows = recorded(
        tmp_path,
        drill("training-resume", 5),
        drill("training-resume", 1, rto_s=9000.0, rto_met=False),
        drill("serving-rebuild", 1),
    )
    grade = objectives([TRAINING, INFERENCE], rows)
    assert grade.status == "fail"
    assert any(e.startswith("training-resume: drill") and "missed the objectives" in e for e in grade.evidence)


def test_objectives_unknown_without_plans() -> None:
    assert objectives([], []).status == "unknown"


def test_independence_is_the_latest_drills_verdict(tmp_path: Path) -> None:
    rows = recorded(tmp_path, drill("a", 3, independence="pass"), drill("a", 1, independence="fail"))
    grade = independence(rows)
    assert grade.status == "fail" and grade.evidence == [f"a: drill {rows[-1].started[:19]} independence fail"]
    assert independence(recorded(tmp_path, drill("a", 0.5, independence="pass"))).status == "pass"
    assert independence([drill("b", 1, independence="not analysed")]).status == "unknown"


def test_drills_recent_fails_on_an_overdue_or_failed_drill(tmp_path: Path) -> None:
    period = dt.timedelta(days=30)
    assert drills_recent(recorded(tmp_path, drill("a", 2)), period, NOW).status == "pass"
    overdue = drills_recent([drill("b", 45)], period, NOW)
    assert overdue.status == "fail" and "over the period of 720h00m" in overdue.evidence[0], overdue.evidence
    failed = drills_recent([drill("c", 1, ok=False)], period, NOW)
    assert failed.status == "fail" and "(failed)" in failed.evidence[0]
    assert drills_recent([], period, NOW).evidence == ["no drill recorded in the catalog"]


def test_drills_recent_counts_scenario_drills(tmp_path: Path) -> None:
    log = ScenarioLog(Catalog(str(tmp_path / "catalog.db")))
    at = (NOW - dt.timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    log.save(
        ScenarioDrillRow(
            id="s1",
            scenario="kueue-config-deleted",
            plan_name="kueue-quotas-only",
            target="127.0.0.1",
            ok=True,
            injected_at=at,
        )
    )
    grade = drills_recent([drill("a", 1)], dt.timedelta(days=30), NOW, scenarios=log.all())
    assert grade.status == "fail"
    assert grade.evidence == [
        "plan a: last drill 24h00m ago (ok)",
        "scenario kueue-config-deleted: last drill 960h00m ago (ok), over the period of 720h00m",
    ]
