"""The files plugin reads only what changed since the parent backup (issue 31, "Unchanged data costs
(almost) nothing"): a file whose size, mtime, ctime, inode and device are unchanged is spliced in from the
parent's chunks, unread; anything else, a parent of other roots or one that fails to authenticate, and
``--force-read`` mean a read."""

from __future__ import annotations

import json
import os
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from drtool_plugins.files import unchanged
from drtool_plugins.files.unchanged import SETTLE_NS, SPLICE_MIN

from drtool.backup import run_backup
from drtool.plugin.manager import get_plugin
from drtool.repo import layout
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.fixtures.core import Cli
from tests.fixtures.noise import noise

_OPENED: list[str] | None = None  # paths opened while a test records them (audit hooks cannot be removed)


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str):
        _OPENED.append(args[0])


sys.addaudithook(_audit)


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """Every path the process opens (for reading or otherwise) while the test runs: a file never opened
    was never read."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """Three large files (each spliced when unchanged) and a small one (always read)."""
    root = tmp_path / "data"
    (root / "shards").mkdir(parents=True)
    for i in range(3):
        (root / "shards" / f"{i}.bin").write_bytes(noise(SPLICE_MIN + 300_001 * (i + 1), i))
    (root / "small.txt").write_text("small\n")
    _settle()
    return root


def _settle() -> None:
    """Let files just written age past the window in which a change would not show in their times."""
    time.sleep(SETTLE_NS / 1e9 + 0.1)


def _backup(repo: Repository, src: Path, **kwargs: object) -> Manifest:
    return run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(src)], **kwargs}})  # type: ignore[arg-type]


def _read_large(opened: list[str], src: Path) -> set[str]:
    return {Path(p).name for p in opened if p.startswith(str(src / "shards"))}


def _restored(repo: Repository, manifest: Manifest, dest: Path) -> dict[str, bytes]:
    outcome = run_restore(repo, manifest, get_plugin("files"), {"path": str(dest)})
    assert outcome.verified, outcome.checks
    return {str(p.relative_to(dest)): p.read_bytes() for p in sorted(dest.rglob("*")) if p.is_file()}


def _tree(src: Path) -> dict[str, bytes]:
    return {f"0-data/{p.relative_to(src)}": p.read_bytes() for p in sorted(src.rglob("*")) if p.is_file()}


def test_unchanged_rebackup_reads_no_large_file_and_restores_identical(
    repo: Repository, src: Path, opened: list[str], tmp_path: Path
) -> None:
    first = _backup(repo, src)
    assert _read_large(opened, src) == {"0.bin", "1.bin", "2.bin"}  # the recorder sees a read
    opened.clear()
    second = _backup(repo, src)
    assert _read_large(opened, src) == set()
    meta = second.plugins["files"].meta
    large = sum((src / "shards" / f"{i}.bin").stat().st_size for i in range(3))
    assert (meta["files_skipped"], meta["bytes_skipped"]) == (3, large)
    assert (meta["files_read"], meta["bytes_read"]) == (1, len("small\n"))
    assert "3 unchanged file(s)" in meta["summary"]
    assert second.stats["bytes_read"] < 64 * 1024  # tar headers and the small file, not the shards
    assert second.stats["bytes_reused"] == large
    [art] = second.artifacts_of("files")
    assert art.size == first.artifacts_of("files")[0].size and art.sha256 == ""
    expected = _tree(src) | {".drtool-restored": second.id.encode()}
    assert _restored(repo, second, tmp_path / "restored") == expected
    opened.clear()
    third = _backup(repo, src)  # a spliced backup is itself a valid parent
    assert _read_large(opened, src) == set() and third.plugins["files"].meta["files_skipped"] == 3


def test_new_mtime_same_size_is_read(repo: Repository, src: Path, opened: list[str], tmp_path: Path) -> None:
    _backup(repo, src)
    victim = src / "shards" / "1.bin"
    st = victim.stat()
    victim.write_bytes(noise(st.st_size, 11))  # same size, new content and mtime
    _settle()
    opened.clear()
    second = _backup(repo, src)
    assert _read_large(opened, src) == {"1.bin"}
    assert second.plugins["files"].meta["files_skipped"] == 2
    assert _restored(repo, second, tmp_path / "r")["0-data/shards/1.bin"] == victim.read_bytes()


def test_same_mtime_new_inode_is_read(repo: Repository, src: Path, opened: list[str], tmp_path: Path) -> None:
    _backup(repo, src)
    victim = src / "shards" / "2.bin"
    st = victim.stat()
    fresh = src / "shards" / ".2.bin.new"
    fresh.write_bytes(noise(st.st_size, 12))
    os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
    fresh.rename(victim)  # same size and mtime, another inode: a tool that replaces files atomically
    assert victim.stat().st_mtime_ns == st.st_mtime_ns and victim.stat().st_ino != st.st_ino
    _settle()
    opened.clear()
    second = _backup(repo, src)
    assert _read_large(opened, src) == {"2.bin"}
    assert _restored(repo, second, tmp_path / "r")["0-data/shards/2.bin"] == victim.read_bytes()


def test_file_changed_just_before_a_backup_is_read_again_next_time(
    repo: Repository, src: Path, opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = src / "shards" / "0.bin"
    victim.write_bytes(noise(victim.stat().st_size, 10))  # within the file system's timestamp tick, a
    # second write after this read could leave size, mtime and ctime as they are. The backup starts a second
    # after the write by the clock the plugin reads, however long a loaded machine takes to get there
    started = victim.stat().st_ctime_ns + 1_000_000_000
    with monkeypatch.context() as clock:
        clock.setattr(unchanged, "time", types.SimpleNamespace(time_ns=lambda: started))
        first = _backup(repo, src)
    assert "0-data/shards/0.bin" not in first.artifacts_of("files")[0].meta["index"]
    opened.clear()
    _backup(repo, src)
    assert _read_large(opened, src) == {"0.bin"}


def test_force_read_setting_and_flag_read_everything(repo: Repository, src: Path, opened: list[str]) -> None:
    _backup(repo, src)
    opened.clear()
    assert _backup(repo, src, force_read=True).plugins["files"].meta["files_skipped"] == 0
    assert _read_large(opened, src) == {"0.bin", "1.bin", "2.bin"}
    opened.clear()
    forced = run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(src)]}}, force_read=True)
    assert forced.plugins["files"].meta["files_skipped"] == 0 and forced.stats["bytes_reused"] == 0
    assert _read_large(opened, src) == {"0.bin", "1.bin", "2.bin"}


def test_parent_of_other_roots_is_not_used(repo: Repository, src: Path, opened: list[str], tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("x")
    _backup(repo, src)
    opened.clear()
    run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(src), str(other)]}})
    assert _read_large(opened, src) == {"0.bin", "1.bin", "2.bin"}


def test_parent_failing_authentication_is_not_used(
    repo: Repository, src: Path, opened: list[str], tmp_path: Path
) -> None:
    first = _backup(repo, src)
    path = Path(repo.backend.url.removeprefix("file://")) / layout.manifest(first.id)
    blob = bytearray(path.read_bytes())
    blob[40] ^= 0x01
    path.write_bytes(bytes(blob))
    opened.clear()
    second = _backup(repo, src)
    assert _read_large(opened, src) == {"0.bin", "1.bin", "2.bin"}
    assert second.status == "complete" and second.plugins["files"].meta["files_skipped"] == 0


def test_cli_force_read_and_summary(cli: Cli, src: Path) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"paths": [str(src)]}}}))
    cli("init", "--store", str(src.parent / "store"), check=True)
    cli("backup", "-p", "files", check=True)
    again = cli("backup", "-p", "files", check=True).stdout
    assert "unchanged and not read" in again and "0 B unchanged" not in again
    large = sum(p.stat().st_size for p in (src / "shards").iterdir())
    assert f"files: 3 unchanged file(s), {large} bytes, not read; 1 read (6 bytes)" in again, again
    forced = json.loads(cli("backup", "-p", "files", "--force-read", "--json", check=True).stdout)
    assert forced["plugins"]["files"]["meta"]["files_skipped"] == 0
    assert forced["stats"]["bytes_reused"] == 0


def test_a_backup_of_no_files_verifies_to_none_not_passed(repo: Repository, tmp_path: Path) -> None:
    """A check over zero files would pass vacuously: the verdict is "none" (drtool.plugin.contract.verification)."""
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    manifest = _backup(repo, empty)
    assert manifest.plugins["files"].meta["files"] == 0
    outcome = run_restore(repo, manifest, get_plugin("files"), {"path": str(tmp_path / "restored")})
    assert (outcome.checks, outcome.verification, outcome.verified, outcome.failed) == ([], "none", False, False)
    assert (tmp_path / "restored" / "0-empty" / "sub").is_dir()
