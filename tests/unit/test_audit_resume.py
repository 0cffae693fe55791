"""The audit item "recovery from an incomplete checkpoint, across nodes and across topologies has been drilled",
graded from drill records that went through a real catalog (SQLite in the test's folder), as `drtool audit`
reads them: a fact the grading needs that the record does not keep would fail here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from drtool.audit.resume import resume_drilled
from drtool.catalog import Catalog
from drtool.catalog.runs import DrillRow, RunLog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.plans.schema import Plan

RESUMES = {
    "type": "training-resumes",
    "id": "resumes",
    "step": "checkpoints",
    "folder": "mlp",
    "trainer": {"image": "trainer:1"},
}
STEPS = [{"id": "checkpoints", "uses": "checkpoints"}, {"id": "k", "uses": "kubernetes"}]
TRAINING = Plan.model_validate({"name": "training-resume", "steps": STEPS, "checks": [RESUMES]})
POOL_MOVE = Plan.model_validate(
    {
        "name": "training-pool-move",
        "steps": STEPS,
        "checks": [RESUMES],
        "transforms": {"node-labels": {"pool=h100": "pool=a100"}},
    }
)
# what run_drill records for a training-resumes check (drtool/drills/run.py keeps each check's facts)
RESUMED = {"recovery_step": 20, "resumed_from_step": 20, "torn_steps": [30], "steps_lost_at_least": 10}


def scenario(ok: bool = True, **facts: Any) -> ScenarioDrillRow:
    check = {"name": "check training-resumes", "ok": ok, "detail": "resumed", "facts": RESUMED | facts}
    return ScenarioDrillRow(
        id=f"s-{ok}-{len(facts)}",
        scenario="checkpoint-store-down",
        plan_name="training-resume",
        target="127.0.0.1",
        ok=ok,
        injected_at="2026-12-05T10:00:00.000000Z",
        rpo_s=95.0,
        rpo_steps=10,
        checks=json.dumps([check]),
    )


def rehearsal(plan: str, ok: bool = True) -> DrillRow:
    return DrillRow(
        id=f"r-{plan}-{ok}", started="2026-12-05T09:00:00Z", plan_name=plan, backup_id="b1", target="lab r1", ok=ok,
        rto_s=80.0,
    )  # fmt: skip


def records(
    tmp_path: Path, scenarios: list[ScenarioDrillRow], rehearsals: list[DrillRow]
) -> tuple[list[DrillRow], list[ScenarioDrillRow]]:
    catalog = Catalog(str(tmp_path / "catalog.db"))
    for row in scenarios:
        ScenarioLog(catalog).save(row)
    RunLog(catalog).save(*rehearsals)
    return RunLog(catalog).drills(), ScenarioLog(catalog).all()


def test_the_item_passes_with_a_torn_checkpoint_drill_and_rehearsals_across_nodes_and_pools(tmp_path: Path) -> None:
    drills, scenarios = records(tmp_path, [scenario()], [rehearsal("training-resume"), rehearsal("training-pool-move")])
    grade = resume_drilled([TRAINING, POOL_MOVE], drills, scenarios)
    assert grade.status == "pass", grade.evidence
    assert grade.evidence[0] == (
        "incomplete checkpoint: checkpoint-store-down drill 2026-12-05T10:00:00 resumed from step 20, "
        "step 30 torn and not used (10 steps lost)"
    )
    assert grade.evidence[1].startswith("across nodes: plan ")
    assert grade.evidence[2].startswith("across topologies: plan training-pool-move rehearsed")


def test_the_item_fails_for_each_missing_drill(tmp_path: Path) -> None:
    # a training drill with no torn checkpoint, one that resumed from the torn step, one that failed
    no_torn = scenario(torn_steps=[])
    from_torn = scenario(resumed_from_step=30)
    failed = scenario(ok=False)
    drills, scenarios = records(tmp_path, [no_torn, from_torn, failed], [rehearsal("training-resume", ok=False)])
    grade = resume_drilled([TRAINING, POOL_MOVE], drills, scenarios)
    assert grade.status == "fail"
    assert grade.evidence[0].startswith("incomplete checkpoint: no succeeded drill resumed past a torn checkpoint")
    assert grade.evidence[1].startswith("across nodes: no succeeded rehearsal of a plan with a training-resumes check")
    assert "moves the GPU pool" in grade.evidence[2]


def test_a_rehearsal_without_a_pool_move_does_not_count_across_topologies(tmp_path: Path) -> None:
    drills, scenarios = records(tmp_path, [scenario()], [rehearsal("training-resume")])
    grade = resume_drilled([TRAINING, POOL_MOVE], drills, scenarios)
    assert grade.status == "fail"
    assert [e.split(":")[0] for e in grade.evidence] == ["incomplete checkpoint", "across nodes", "across topologies"]
    assert grade.evidence[1].startswith("across nodes: plan training-resume")
    assert grade.evidence[2].startswith("across topologies: no succeeded rehearsal")
    # without plans the audit cannot tell which rehearsals resume training
    assert resume_drilled([], drills, scenarios).status == "unknown"
