"""`drtool audit`'s checkpoint item, from the store: the ``checkpoints`` plugin records what state each
checkpoint carries and when it was saved; the audit grades the newest backup's newest checkpoints.

Real checkpoint layouts on disk (DCP with its ``.metadata``, safetensors with an index, a marker directory
beside its optimizer and RNG files), backed up into a real store.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import numpy as np
from drtool_plugins.checkpoints.samples import Put, write_dcp, write_safetensors

from drtool.audit.checkpoints import checkpoints
from drtool.backup import run_backup
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository

RPO = dt.timedelta(minutes=30)


def putter(root: Path) -> Put:
    def put(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return put


def tensors(*names: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(29)
    return {n: rng.standard_normal((4, 4)).astype(np.float32) for n in names}


def back_up(repo: Repository, root: Path) -> str:
    manifest = run_backup(repo, [get_plugin("checkpoints")], {"checkpoints": {"path": str(root), "name": "ckpt"}})
    assert manifest.status == "complete"
    return manifest.id


def test_a_dcp_checkpoint_with_the_whole_training_state_passes(repo: Repository, tmp_path: Path) -> None:
    state = ("model.layer.0.weight", "optim.state.0.exp_avg", "lr_scheduler.last_epoch", "rng_state", "scaler.scale")
    write_dcp(putter(tmp_path / "ckpt"), "run-1/step-100", tensors(*state))
    backup_id = back_up(repo, tmp_path / "ckpt")
    grade = checkpoints(repo, RPO)
    assert grade.status == "pass", grade.evidence
    # `step` from the checkpoint's own name (step-100), the rest from the tensor names in .metadata
    assert grade.evidence[0] == (
        f"backup {backup_id}: ckpt/run-1/step-100 (dcp): carries optimizer, scheduler, step, rng, scaler"
    )
    assert "within the training RPO of 30m00s" in grade.evidence[1]


def test_weights_only_fail_naming_what_is_missing(repo: Repository, tmp_path: Path) -> None:
    write_safetensors(putter(tmp_path / "ckpt"), "export", [tensors("model.layer.0.weight", "model.layer.1.weight")])
    back_up(repo, tmp_path / "ckpt")
    grade = checkpoints(repo, RPO)
    assert grade.status == "fail"
    assert "(safetensors): carries weights only; missing optimizer, scheduler, step, rng" in grade.evidence[0]


def test_a_stale_checkpoint_fails_the_training_rpo(repo: Repository, tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    put = putter(root)
    write_safetensors(put, "checkpoint-500", [tensors("model.layer.0.weight")])
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        put(f"checkpoint-500/{name}", b"{}")
    then = time.time() - 2 * 3600
    for path in root.rglob("*"):
        os.utime(path, (then, then))
    back_up(repo, root)
    grade = checkpoints(repo, RPO)
    assert grade.status == "fail"
    assert "carries optimizer, scheduler, step, rng" in grade.evidence[0]
    assert "saved 2h00m ago, over the training RPO of 30m00s" in grade.evidence[1], grade.evidence


def test_no_complete_checkpoint_fails_and_no_store_is_unknown(repo: Repository, tmp_path: Path) -> None:
    write_dcp(putter(tmp_path / "ckpt"), "run-1/step-200", tensors("model.w", "optim.w"), finished=False)
    back_up(repo, tmp_path / "ckpt")
    grade = checkpoints(repo, RPO)
    assert grade.status == "fail" and "holds a complete checkpoint" in grade.evidence[0]
    assert checkpoints(None, RPO).status == "unknown"
