"""A training rehearsal end to end: the trainer killed while it saves a checkpoint, `drtool rehearse` into a
fresh lab resumes the run there and says what was lost (the recovery point in steps and in training time).

Its own labs, nothing shared with tests/plans_rehearsal/test_living_restore.py's restored living cluster: in a
file of its own it runs on the other xdist worker (tests/run.sh, tests/fixtures/schedule.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from drtool_lab.lab import Lab
from drtool_lab.targets import seed_sources

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli
from tests.plans_rehearsal.test_platform_checks import TRAINER


@pytest.mark.timeout(1800)  # 460 s at load average 27 (about 1 min quiet): the suite's 600 s is too near
def test_a_training_rehearsal_reports_the_recovery_point_in_steps_and_time_lost(
    lab_root: Path, tmp_path: Path, cli: Cli
) -> None:
    """Source: the trainer killed while saving step 30. `drtool rehearse` restores into a fresh lab, resumes the
    run there (its trainer a Job of the restored cluster, which the lab's node runs) and says what was lost:
    the steps after 20, and the training time since step 20 was saved."""
    source = Lab("training-source", lab_root)
    plugins = [get_plugin("checkpoints"), get_plugin("kubernetes")]  # the cluster runs the trainer's Job
    try:
        sources = seed_sources(source, plugins)
        repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
        run_backup(repo, plugins, sources)
        plan = tmp_path / "training.yaml"
        check = {
            "type": "training-resumes",
            "id": "resumes",
            "step": "checkpoints",
            "folder": "mlp",
            "trainer": TRAINER,
        }
        steps = [{"id": "checkpoints", "uses": "checkpoints"}, {"id": "cluster", "uses": "kubernetes"}]
        waivers = [{"match": "*", "reason": "the seeded cluster's own dependencies are not what this test judges"}]
        plan.write_text(json.dumps({"name": "training-only", "steps": steps, "checks": [check], "waivers": waivers}))
    finally:  # lost for good before the rehearsal: `--source-lab` would stop it and start it again afterwards (a
        source.down()  # living lab and MinIO for nothing here; test_rehearsal.py's CLI test drills `--source-lab`)
    args = ["rehearse", "--plan", str(plan), "--out", str(tmp_path / "reports")]
    proc = cli("--store", repo.backend.url, *args, env={"DRTOOL_LAB_DIR": str(lab_root)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "training mlp: resumed from step 20, step 30 torn; at least 10 steps and" in out, out
    assert re.search(r"restore steps done \S+, in service \S+", out)
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    run = report["run"]
    (point,) = run["training"]
    assert (point["recovery_step"], point["torn_steps"], point["steps_lost_at_least"]) == (20, [30], 10)
    assert 0 < point["wall_time_lost_s"] < 900  # the failure (the source stopped) minus when step 20 was saved
    rto = run["rto"]
    assert rto["restored_s"] <= rto["service_s"] <= rto["confirmed_s"] and rto["measured_s"] == rto["service_s"]
    assert rto["first_workload_s"] is None  # no queue was asked to admit anything
    md = next((tmp_path / "reports").glob("*.md")).read_text()
    assert "## Training recovery point" in md and "| mlp | step 20 | 30 | at least 10 |" in md
