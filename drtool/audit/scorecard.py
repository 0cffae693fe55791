"""Run every checklist item once and collect the scorecard: the one entry point the CLI and tests call."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence

from drtool.catalog.runs import DrillRow
from drtool.catalog.scenarios import ScenarioDrillRow
from drtool.independence.analysis import IndependenceReport
from drtool.plans.schema import Plan
from drtool.repo.repository import Repository
from drtool.scheduler.sets import BackupSet

from . import checkpoints, records, resume, workloads
from .cluster import ClusterView
from .grades import Scorecard

DEFAULT_DRILL_PERIOD = dt.timedelta(days=30)


@dataclasses.dataclass
class AuditInputs:
    """What the audit reads; all but the cluster are optional, and an item without its input is graded unknown."""

    cluster: ClusterView
    plans: Sequence[Plan] = ()
    sets: Mapping[str, BackupSet] = dataclasses.field(default_factory=dict)  # the config's backup_sets
    drills: Sequence[DrillRow] = ()
    scenario_drills: Sequence[ScenarioDrillRow] = ()
    store: Repository | None = None  # where the checkpoints' backups are
    independence: IndependenceReport | None = None
    drill_period: dt.timedelta = DEFAULT_DRILL_PERIOD
    max_gpu_retries: int = 3


def training_rpo(plans: Sequence[Plan], sets: Mapping[str, BackupSet]) -> dt.timedelta | None:
    """The strictest RPO among the training plans and backup sets: the age a checkpoint may reach."""
    rpos = [p.objectives.rpo for p in plans if p.objectives.workload == "training" and p.objectives.rpo]
    rpos += [s.rpo for s in sets.values() if s.workload == "training" and s.rpo]
    return min(rpos, default=None)


def run_audit(inputs: AuditInputs) -> Scorecard:
    grades = [
        records.objectives(inputs.plans, inputs.drills, inputs.sets),
        checkpoints.checkpoints(inputs.store, training_rpo(inputs.plans, inputs.sets)),
        resume.resume_drilled(inputs.plans, inputs.drills, inputs.scenario_drills),
    ]
    view = inputs.cluster
    grades += [
        workloads.preemptible_save(view),
        workloads.inference_spread(view),
        workloads.pdb_drain(view),
        workloads.gpu_isolation(view, inputs.max_gpu_retries),
    ]
    grades += [
        records.independence(inputs.drills, inputs.independence),
        records.drills_recent(inputs.drills, inputs.drill_period, scenarios=inputs.scenario_drills),
    ]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Scorecard(grades, view.scope, now)
