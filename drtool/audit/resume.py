"""The checklist item "recovery from an incomplete checkpoint, across nodes and across topologies has been
drilled", graded from the drill records and the plans they ran.

Three things, each proven by a succeeded drill, never by configuration alone:

- **an incomplete checkpoint**: a scenario drill (``checkpoint-store-down``) whose ``training-resumes`` check
  resumed from the last complete checkpoint while the backup held a torn one (the check's facts: its torn
  steps, and the step it resumed from);
- **across nodes**: a rehearsal (the whole cluster lost, restored into a fresh one: none of the nodes that
  saved) of a plan with a ``training-resumes`` check;
- **across topologies**: such a rehearsal of a plan that also moves the GPU pool (``transforms: node-labels``),
  so the run resumed on another accelerator pool. A change of parallel layout (world size) inside the
  trainer is the trainer's own test: drtool does not see it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from drtool.catalog.runs import DrillRow
from drtool.catalog.scenarios import ScenarioDrillRow
from drtool.plans.schema import Plan

from .grades import Grade, Status, worst

ITEM = "resume-drilled"
TITLE = "Recovery from an incomplete checkpoint, across nodes and across topologies has been drilled"
RESUME_CHECK = "training-resumes"


def _torn_resume(drill: ScenarioDrillRow) -> Mapping[str, Any] | None:
    """The facts of a passed training check that resumed past a torn checkpoint, if the drill has one."""
    for check in json.loads(drill.checks):
        facts = check.get("facts") or {}
        if check.get("ok") and facts.get("torn_steps") and facts.get("resumed_from_step") == facts.get("recovery_step"):
            return facts
    return None


def _incomplete(scenarios: Sequence[ScenarioDrillRow]) -> tuple[Status, str]:
    for drill in sorted(scenarios, key=lambda d: d.injected_at, reverse=True):
        facts = _torn_resume(drill) if drill.ok else None
        if facts is not None:
            torn = ", ".join(map(str, facts["torn_steps"]))
            return "pass", (
                f"incomplete checkpoint: {drill.scenario} drill {drill.injected_at[:19]} resumed from step "
                f"{facts['recovery_step']}, step {torn} torn and not used ({drill.rpo_steps} steps lost)"
            )
    return "fail", (
        "incomplete checkpoint: no succeeded drill resumed past a torn checkpoint (drtool drill checkpoint-store-down)"
    )


def _rehearsed(
    drills: Sequence[DrillRow], plans: Mapping[str, Plan], moves_pool: bool, what: str, how: str
) -> tuple[Status, str]:
    for drill in sorted(drills, key=lambda d: d.started, reverse=True):
        plan = plans.get(drill.plan_name)
        if plan is None or not drill.ok or not any(c.type == RESUME_CHECK for c in plan.checks):
            continue
        if moves_pool and not plan.transforms.node_labels:
            continue
        return "pass", f"{what}: plan {plan.name} rehearsed {drill.started[:19]} into {drill.target}, training resumed"
    return "fail", f"{what}: no succeeded rehearsal of a plan with a {RESUME_CHECK} check{how}"


def resume_drilled(plans: Sequence[Plan], drills: Sequence[DrillRow], scenarios: Sequence[ScenarioDrillRow]) -> Grade:
    by_name = {p.name: p for p in plans}
    found = [_incomplete(scenarios)]
    if not plans:
        found.append(
            ("unknown", "across nodes and topologies: no plans given (--plans) to tell which rehearsals resume")
        )
    else:
        found.append(_rehearsed(drills, by_name, False, "across nodes", " (drtool rehearse: a fresh cluster)"))
        found.append(
            _rehearsed(drills, by_name, True, "across topologies", " that moves the GPU pool (transforms: node-labels)")
        )
    return Grade(ITEM, TITLE, worst(s for s, _ in found), [e for _, e in found])
