"""The checkpoints plugin's verification after a restore: a sample checked against what the restore wrote,
or everything with verify=full (plugins/checkpoints/receipts.py). Directory targets: no server needed.

Each damage below is made where only the named part of verification can see it, so a verification that
skipped that part passes the damaged target and the test fails."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drtool_plugins.checkpoints import CheckpointsPlugin
from drtool_plugins.checkpoints import location as loc_mod
from drtool_plugins.checkpoints.receipts import BLOCK, WHOLE

from drtool.backup import run_backup
from drtool.errors import UsageError
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.restore import run_restore
from tests.fixtures.core import Cli, assert_clean_error

PLUGIN = CheckpointsPlugin()
BIG = "run/step-5/weights.bin"  # larger than WHOLE: sampled by blocks
SMALL = "run/step-5/optimizer.bin"  # read back whole
BIG_SIZE = 6 * BLOCK + 12345


def _backup(repo: Repository, tmp_path: Path) -> Any:
    src = tmp_path / "vol"
    rng = np.random.default_rng(31)
    for key, size in ((BIG, BIG_SIZE), (SMALL, 70_000), ("run/step-5/COMPLETE", 0)):
        (src / key).parent.mkdir(parents=True, exist_ok=True)
        (src / key).write_bytes(rng.bytes(size))
    return run_backup(repo, [PLUGIN], {"checkpoints": {"sources": [{"name": "vol", "path": str(src)}]}})


def _flip(path: Path, offset: int) -> None:
    """One byte changed in place: same size."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


class _LyingTarget:
    """A directory target that acknowledges each write and then holds other bytes at ``offset`` of ``key``:
    the receipt's stat is taken after the damage, so only reading the bytes back can catch it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, key: str, offset: int) -> None:
        real = loc_mod.DirLocation.put

        def put(loc: loc_mod.DirLocation, k: str, stream: Any, size: int, sha256: str) -> None:
            real(loc, k, stream, size, sha256)
            if k == key:
                _flip(loc.root / k, offset)

        monkeypatch.setattr(loc_mod.DirLocation, "put", put)


def _equal_check(checks: list[Any]) -> Any:
    return next(c for c in checks if c.name.endswith("objects equal to backup"))


@pytest.mark.parametrize(
    ("key", "offset"),
    [(SMALL, 69_999), (BIG, 10), (BIG, BIG_SIZE - 1)],
    ids=["small-object-read-whole", "first-block", "last-block"],
)
def test_sampled_verify_reads_back_what_the_target_holds(
    repo: Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, offset: int
) -> None:
    manifest = _backup(repo, tmp_path)
    _LyingTarget(monkeypatch, key, offset)
    outcome = run_restore(repo, manifest, PLUGIN, {"path": str(tmp_path / "out")})
    check = _equal_check(outcome.checks)
    assert not outcome.verified and not check.ok, outcome.checks
    assert key in check.detail and "sampled" in check.detail


def test_object_replaced_after_the_restore_fails_verification(repo: Repository, tmp_path: Path) -> None:
    """Another writer replaces an object after the restore, same size and mtime, the change in a block the
    sample may not read: the receipt's stat (a new inode) catches it."""
    manifest = _backup(repo, tmp_path)
    ctx = PluginRestoreContext(repo, manifest, "checkpoints")
    target = {"path": str(tmp_path / "out")}
    assert PLUGIN.restore(ctx, target, {}).changed
    assert all(c.ok for c in PLUGIN.verify(ctx, target, {}))
    restored = tmp_path / "out" / BIG
    other = restored.with_name("other")
    other.write_bytes(restored.read_bytes())
    _flip(other, 3 * BLOCK)
    st = restored.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, restored)  # both existed at once: the new file has another inode
    check = _equal_check(PLUGIN.verify(ctx, target, {}))
    assert not check.ok and BIG in check.detail


def test_sampled_verify_reads_a_sample_and_full_reads_everything(repo: Repository, tmp_path: Path) -> None:
    manifest = _backup(repo, tmp_path)
    ctx = PluginRestoreContext(repo, manifest, "checkpoints")
    target = {"path": str(tmp_path / "out")}
    PLUGIN.restore(ctx, target, {})
    total = BIG_SIZE + 70_000
    sampled = _equal_check(PLUGIN.verify(ctx, target, {}))
    # the small object whole, and 4 of the big one's 7 blocks (first, last, two at random; the last is short)
    read = 70_000 + 3 * BLOCK + (BIG_SIZE - 6 * BLOCK)
    assert sampled.ok and "sampled (3 of 3 objects" in sampled.detail
    assert f"{read / BLOCK:.1f} of {total / BLOCK:.1f} MiB read back" in sampled.detail, sampled.detail
    full = _equal_check(PLUGIN.verify(ctx, target, {"verify": "full"}))
    assert full.ok and f"verify=full: {total / BLOCK:.1f} of {total / BLOCK:.1f} MiB" in full.detail
    # without this run's receipts (a verification on its own): everything is read back too
    alone = _equal_check(PLUGIN.verify(PluginRestoreContext(repo, manifest, "checkpoints"), target, {}))
    assert alone.ok and alone.detail.endswith(f"verify=full: {total / BLOCK:.1f} of {total / BLOCK:.1f} MiB read back")
    assert BIG_SIZE > WHOLE >= 70_000


def test_verify_full_reads_a_block_the_sample_skipped(
    repo: Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The damage in a middle block the target acknowledged: verify=full finds it wherever it is."""
    manifest = _backup(repo, tmp_path)
    _LyingTarget(monkeypatch, BIG, 3 * BLOCK + 7)
    outcome = run_restore(repo, manifest, PLUGIN, {"path": str(tmp_path / "out")}, options={"verify": "full"})
    check = _equal_check(outcome.checks)
    assert not check.ok and BIG in check.detail and "verify=full" in check.detail


def test_a_bad_verify_mode_is_one_line() -> None:
    with pytest.raises(UsageError, match="verify='some'"):
        PLUGIN.verify(None, {"path": "/nonexistent"}, {"verify": "some"})  # type: ignore[arg-type]


def test_cli_verify_flag_is_checked_before_anything_runs(cli: Cli) -> None:
    assert_clean_error(cli("restore", "latest", "-p", "checkpoints", "--verify=quick"), 2, "--verify=quick")
    proc = cli("restore", "latest", "-p", "checkpoints", "--verify=full", "--no-verify")
    assert_clean_error(proc, 2, "without --no-verify")
