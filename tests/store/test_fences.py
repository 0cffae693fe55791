"""Fences (drtool/repo/fences.py, docs/standby.md): the owner fences a set, its backups then publish nothing,
and the CronJob's key-file identity can neither write a fence nor plant one that counts."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from drtool.backends.local import LocalBackend
from drtool.crypto.credentials import Credentials
from drtool.errors import Fenced, UsageError
from drtool.plugin.manager import get_plugin
from drtool.repo import fences
from drtool.repo.jobs import read_parts
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.shards import run_shard_backup
from tests.fixtures.core import PASSPHRASE

SET = "prod"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Repository, Repository]:
    """The owner's view (passphrase) and the CronJob's (key file) of one store."""
    secret = secrets.token_bytes(32)
    owner = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE, keyfile_secret=secret)
    cron = Repository.open(LocalBackend(tmp_path / "store"), Credentials(keyfile_secret=secret))
    assert owner.owner is not None and cron.owner is None
    return owner, cron


def _backup(repo: Repository, backup_set: str = SET) -> str:
    with BackupSession(repo, backup_set=backup_set) as session:
        with session.context_for("files").artifact("a") as sink:
            sink.write(b"data")
        return session.commit().id


def test_a_fenced_set_publishes_nothing_more(store: tuple[Repository, Repository]) -> None:
    owner, cron = store
    _backup(cron)
    before = set(cron.backup_ids())
    fence = fences.write_fence(owner, SET, "failover", ("https://10.0.0.1:6443",))
    assert fence.primary == ("https://10.0.0.1:6443",) and fence.stored is not None
    with pytest.raises(Fenced, match="fenced since"):
        _backup(cron)
    assert set(cron.backup_ids()) == before
    _backup(cron, "other")  # only the fenced set stops


def test_the_cronjob_identity_cannot_write_a_fence(store: tuple[Repository, Repository]) -> None:
    _, cron = store
    with pytest.raises(UsageError, match="owner's key"):
        fences.write_fence(cron, SET, "hostile", ())
    with pytest.raises(UsageError, match="owner's key"):
        fences.lift_fence(cron, SET)


def test_a_planted_fence_without_the_owner_signature_is_ignored(store: tuple[Repository, Repository]) -> None:
    """A master-key holder seals a record that looks like a fence: backups go on, with a warning."""
    _, cron = store
    name = fences.object_name(SET)
    body = {"set": SET, "written": "2026-01-01T00:00:00Z", "reason": "planted", "primary": []}
    cron.backend.put(name, cron.key.seal(fences.KIND, name, json.dumps({"body": body, "sig": "AAAA"}).encode()))
    assert fences.read_fence(cron, SET) is None
    assert "owner's signature" in cron.skipped[name]
    _backup(cron)


def test_a_lifted_fence_lets_the_set_publish_again(store: tuple[Repository, Repository]) -> None:
    owner, cron = store
    fences.write_fence(owner, SET, "failover", ())
    assert fences.lift_fence(owner, SET)
    _backup(cron)
    assert not fences.lift_fence(owner, SET)


def test_a_bad_set_name_is_refused_in_one_line(store: tuple[Repository, Repository]) -> None:
    owner, _ = store
    with pytest.raises(UsageError, match="not a backup set name"):
        fences.write_fence(owner, "../keys", "x", ())


def test_a_fenced_sets_sharded_backup_is_refused_at_publish(
    store: tuple[Repository, Repository], tmp_path: Path
) -> None:
    """The sharded commit publishes its own manifest (drtool/shards.py), not through ``BackupSession.commit``:
    a fence written while the workers run stops it too, the parts stay unpublished."""
    owner, cron = store
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(b"cert")
    plugins, sources = [get_plugin("files")], {"files": {"paths": [str(tmp_path / "pki")]}}
    before = set(cron.backup_ids())
    first = run_shard_backup(cron, plugins, sources, job="job-1", index=0, count=2, backup_set=SET)
    assert first.manifest is None  # worker 1 has not written its part
    fences.write_fence(owner, SET, "failover", ())
    with pytest.raises(Fenced, match="fenced since"):
        run_shard_backup(cron, plugins, sources, job="job-1", index=1, count=2, backup_set=SET)
    assert set(cron.backup_ids()) == before
    assert sorted(read_parts(cron, "job-1")) == [0, 1]  # nothing published, nothing lost
    assert fences.lift_fence(owner, SET)  # after a failback: the rerun's commit publishes the parts
    done = run_shard_backup(cron, plugins, sources, job="job-1", index=1, count=2, backup_set=SET)
    assert done.manifest is not None and set(cron.backup_ids()) == before | {done.manifest.id}
