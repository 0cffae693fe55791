"""A failover plan's steps of plugins the standby does not hydrate (drtool/standby/steps.py, docs/standby.md):
restored from the newest backup of the set the store received before the fence, never from one after it."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.plans.schema import Plan
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo import fences
from drtool.repo.repository import Repository
from drtool.standby.steps import run_plan_steps
from tests.fixtures.core import PASSPHRASE

SET = "prod"


@pytest.fixture
def owner(tmp_path: Path) -> Repository:
    return Repository.init(
        LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE, keyfile_secret=secrets.token_bytes(32)
    )


def _plan(tmp_path: Path, restored: Path, optional_missing: bool = True) -> Plan:
    steps = [
        {"id": "cluster-objects", "uses": "kubernetes"},  # the standby's own: hydration did it
        {"id": "pki", "uses": "files"},
        {"id": "checkpoints", "uses": "checkpoints", "optional": optional_missing},
    ]
    body = {"name": "failover", "steps": steps, "target": {"files": {"path": str(restored)}}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(body))
    return check_file(path, load_plugins()).require()


def _backup(repo: Repository, source: Path, content: bytes) -> str:
    (source / "ca.crt").write_bytes(content)
    sources = {"files": {"paths": [str(source)]}}
    return run_backup(repo, [get_plugin("files")], sources, backup_set=SET).id


def test_the_failover_restores_from_before_the_fence_only(owner: Repository, tmp_path: Path) -> None:
    """A backup the store received after the fence (the record deleted by a store writer allowed to delete,
    then the old primary's CronJob published again) is the old primary's: the failover's step never reads it."""
    source, restored = tmp_path / "pki", tmp_path / "restored"
    source.mkdir()
    before_fence = _backup(owner, source, b"before the failure")
    fence = fences.write_fence(owner, SET, "failover", ())
    assert fences.lift_fence(owner, SET)  # as a deleting store writer would
    _backup(owner, source, b"the fenced primary's")
    done = run_plan_steps(owner, _plan(tmp_path, restored), SET, ["kubernetes"], {}, fence.stored, time.monotonic)
    pki, checkpoints = done.results
    assert pki["ok"] and pki["backup"] == before_fence and done.manifest is not None
    assert next(restored.rglob("ca.crt")).read_bytes() == b"before the failure"
    assert checkpoints["ok"] and checkpoints["detail"].startswith("skipped: no backup of set prod")  # optional


def test_a_checkpoints_step_restores_each_runs_newest_complete_checkpoint(owner: Repository, tmp_path: Path) -> None:
    """What a training run resumes from, first: the newest complete checkpoint (not the torn one after it, not
    the older ones), and the step it is at, for the RPO in training steps."""
    import numpy as np
    from drtool_plugins.checkpoints import samples

    source, restored = tmp_path / "runs", tmp_path / "restored"

    def put(key: str, data: bytes) -> None:
        (source / key).parent.mkdir(parents=True, exist_ok=True)
        (source / key).write_bytes(data)

    rng = np.random.default_rng(7)
    for step in (100, 200):
        samples.write_dcp(put, f"llama-ft/step-{step}", samples.random_tensors(rng, 2, (8, 8)))
    samples.write_dcp(put, "llama-ft/step-300", samples.random_tensors(rng, 2, (8, 8)), finished=False)
    sources = {"checkpoints": {"sources": [{"name": "training", "path": str(source)}]}}
    run_backup(owner, [get_plugin("checkpoints")], sources, backup_set=SET)
    steps = [{"id": "checkpoints", "uses": "checkpoints"}]
    (tmp_path / "plan.json").write_text(
        json.dumps({"name": "failover", "steps": steps, "target": {"checkpoints": {"path": str(restored)}}})
    )
    plan = check_file(tmp_path / "plan.json", load_plugins()).require()
    (step,) = run_plan_steps(owner, plan, SET, ["kubernetes"], {}, None, time.monotonic).results
    assert step["ok"], step
    assert step["resume_steps"] == {"llama-ft": 200}
    assert {p.parent.name for p in restored.rglob("*") if p.is_file()} == {"step-200"}


def test_a_required_step_without_a_backup_fails_the_failover(owner: Repository, tmp_path: Path) -> None:
    source = tmp_path / "pki"
    source.mkdir()
    _backup(owner, source, b"x")
    plan = _plan(tmp_path, tmp_path / "restored", optional_missing=False)
    done = run_plan_steps(owner, plan, SET, ["kubernetes"], {}, None, time.monotonic)
    assert [r["ok"] for r in done.results] == [True, False]
    assert done.results[1]["detail"] == "no backup of set prod holds plugin checkpoints"
