"""Backup sets carry a workload class (``workload: training|inference`` in the config's ``backup_sets``), and the
audit's per-class objectives read them: a set's rpo completes a plan's rto of the same class, and the
checkpoint age is held to the strictest training rpo of plans and sets."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from drtool.audit.records import objectives
from drtool.audit.scorecard import training_rpo
from drtool.config import load_settings
from drtool.errors import UsageError
from drtool.plans.schema import Plan


def plan(name: str, **objectives: str) -> Plan:
    return Plan.model_validate({"name": name, "objectives": objectives, "steps": [{"id": "k", "uses": "kubernetes"}]})


CONFIG = """
store: /srv/store
backup_sets:
  checkpoints-hourly: {plugins: [checkpoints], interval: 1h, rpo: 2h, workload: training}
  serving-nightly: {plugins: [kubernetes], cron: "0 2 * * *", rpo: 1d, workload: inference}
  misc: {plugins: [kubernetes], interval: 6h, rpo: 12h}
"""


def sets(tmp_path: Path, text: str = CONFIG):
    path = tmp_path / "drtool.yaml"
    path.write_text(text)
    return load_settings(str(path)).backup_sets


def test_a_sets_rpo_completes_a_plans_rto_of_the_same_class(tmp_path: Path) -> None:
    loaded = sets(tmp_path)
    assert loaded["checkpoints-hourly"].workload == "training" and loaded["misc"].workload is None
    plans = [plan("training-resume", workload="training", rto="2h"), plan("serving", workload="inference", rto="15m")]
    without = objectives(plans, [])
    assert without.status == "fail", without.evidence  # rto alone: no rpo for either class
    grade = objectives(plans, [], loaded)
    assert grade.status == "unknown", grade.evidence  # both classes defined; neither plan drilled yet
    assert "training: training-resume" in grade.evidence and "inference: serving" in grade.evidence
    assert "training backup sets: checkpoints-hourly (rpo 2h00m)" in grade.evidence
    assert "objectives without a workload class: backup set misc" in grade.evidence
    # the checkpoint age is held to the strictest training rpo, plans' and sets' alike
    assert training_rpo(plans, loaded) == dt.timedelta(hours=2)
    assert training_rpo([plan("t", workload="training", rto="1h", rpo="30m")], loaded) == dt.timedelta(minutes=30)


def test_an_unknown_workload_class_is_refused_in_one_line(tmp_path: Path) -> None:
    text = "backup_sets:\n  x: {plugins: [kubernetes], interval: 1h, workload: batch}\n"
    with pytest.raises(UsageError) as err:
        sets(tmp_path, text)
    assert "backup set 'x'" in err.value.message and "workload" in err.value.message
