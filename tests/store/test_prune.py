"""Prune on real stores: retention per set, chunk garbage collection, dry run, Object Lock on MinIO."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path

import pytest

from drtool.backends import open_backend
from drtool.backup import run_backup
from drtool.crypto.master import MANIFEST
from drtool.plugin.manager import get_plugin
from drtool.prune import prune
from drtool.repo import layout
from drtool.repo.check import check
from drtool.repo.lock import StoreLocked, acquire
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.retention import RetentionPolicy
from tests.fixtures import stores
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.noise import noise


def backup_files(repo: Repository, folder: Path, content: bytes, backup_set: str, tags: list[str] | None = None) -> str:
    """A real backup with the files plugin of one file holding ``content`` (random data: unique chunks)."""
    folder.mkdir(exist_ok=True)
    (folder / "data.bin").write_bytes(content)
    sources = {"files": {"paths": [str(folder)]}}
    return run_backup(repo, [get_plugin("files")], sources, backup_set=backup_set, tags=tags).id


def chunks_of(repo: Repository, backup_id: str) -> set[str]:
    return {c for a in repo.get_manifest(backup_id).artifacts for c, _ in a.chunks}


def chunks_of_pack(repo: Repository, name: str) -> set[str]:
    return {c for c in repo.chunk_ids() if stores.where(repo, c)[0] == name}


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Repository:
    url = str(tmp_path / "store") if request.param == "local" else request.getfixturevalue("s3_store_url")
    return Repository.init(open_backend(url), passphrase=PASSPHRASE)


def test_prune_forgets_per_set_and_collects_only_unreferenced_chunks(store: Repository, tmp_path: Path) -> None:
    shared = noise(300_000)  # in every backup of set a: must survive
    a = [backup_files(store, tmp_path / "a", shared + noise(200_000, seed), "a") for seed in range(1, 5)]
    milestone = backup_files(store, tmp_path / "a", shared + noise(200_000, 5), "a", tags=["milestone"])
    a.append(backup_files(store, tmp_path / "a", shared + noise(200_000, 6), "a"))
    b = [backup_files(store, tmp_path / "b", noise(100_000, seed), "b") for seed in range(7, 9)]
    doomed_chunks = (chunks_of(store, a[0]) | chunks_of(store, a[1]) | chunks_of(store, a[2])) - chunks_of(store, a[3])
    before = set(store.chunk_ids())

    dry = prune(store, {"a": RetentionPolicy(keep_last=3)}, dry_run=True)
    assert set(dry.forgotten) == set(a[:3]) and dry.chunks_deleted > 0
    assert set(store.chunk_ids()) == before and len(store.backup_ids()) == 8  # a dry run changes nothing

    report = prune(store, {"a": RetentionPolicy(keep_last=3)})
    assert set(report.forgotten) == set(a[:3])
    assert sorted(store.backup_ids()) == sorted([a[3], milestone, a[4], *b])  # set b has no policy: all kept
    reasons = {d.backup.id: d.reasons for d in report.decisions["a"]}
    assert reasons[milestone] == ("tagged milestone (never pruned)", "last #2")
    assert reasons[a[0]] == ("no rule keeps it",)
    after = set(store.chunk_ids())
    assert after == before - doomed_chunks and report.chunks_deleted == len(doomed_chunks)
    assert chunks_of(store, a[3]) <= after
    result = check(store, read_data=True)
    assert result.ok and result.orphan_chunks == [], result.to_json()
    assert report.stale_locks_removed == [] and list(store.backend.list(layout.LOCKS)) == []

    only_b = prune(store, {"a": RetentionPolicy(keep_last=1), "b": RetentionPolicy(keep_last=1)}, only_set="b")
    assert only_b.forgotten == [b[0]]  # --set b leaves set a alone


def test_orphans_of_an_abandoned_backup_are_collected(store: Repository, tmp_path: Path) -> None:
    keep = backup_files(store, tmp_path / "k", noise(100_000, 1), "s")
    with BackupSession(store, backup_set="s") as session:
        with session.context_for("files").artifact("x") as sink:
            sink.write(noise(300_000, 2))
        session.chunks.flush()  # chunks stored (and in format 2 indexed), manifest never written: the process "died"
    orphans = set(store.chunk_ids()) - chunks_of(store, keep)
    assert orphans
    report = prune(store, {})
    assert report.forgotten == [] and report.chunks_deleted == len(orphans)
    assert set(store.chunk_ids()) == chunks_of(store, keep)


def test_unreadable_manifest_stops_the_sweep(store: Repository, tmp_path: Path) -> None:
    """A manifest sealed with the store's key that this drtool cannot read (a newer one's) may name any chunk:
    nothing is swept. One that does not authenticate is no backup (anyone can put it there, Object Lock may
    keep it for years): it is skipped, named, and the sweep goes on (tests/store/test_hostile_objects.py)."""
    backup_files(store, tmp_path / "k", noise(100_000, 1), "s")
    unreadable = "20200101T000000Z-abcdef"
    store.backend.put(layout.manifest(unreadable), store.key.seal(MANIFEST, unreadable, b"not a manifest"))
    with BackupSession(store) as session, session.context_for("files").artifact("x") as sink:
        sink.write(noise(100_000, 2))
    before = set(store.chunk_ids())
    report = prune(store, {"s": RetentionPolicy(keep_last=1)})
    assert unreadable in report.unreadable_manifests
    assert report.chunks_deleted == 0 and set(store.chunk_ids()) == before
    store.delete_manifest(unreadable)
    backup_files(store, tmp_path / "k2", noise(100_000, 3), "s")  # keep_last=1: the first one's chunks go
    planted = layout.manifest("20200101T000000Z-000000")
    store.backend.put(planted, b"not a manifest")
    report = prune(store, {"s": RetentionPolicy(keep_last=1)})
    assert report.unreadable_manifests == {} and report.chunks_deleted > 0
    assert planted in report.ignored and "truncated" in report.ignored[planted]


def test_prune_waits_for_running_backups_and_removes_stale_locks(store: Repository, tmp_path: Path) -> None:
    with acquire(store, "shared", "backup"), pytest.raises(StoreLocked, match="is locked"):
        prune(store, {}, lock_wait=0.3)
    stale = acquire(store, "shared", "vanished backup", ttl=0.2)
    stale._stop.set()
    stale._thread.join()
    time.sleep(0.4)
    report = prune(store, {})
    assert report.stale_locks_removed == [stale.id]


def test_object_lock_retention_is_reported_not_an_error(minio, minio_env, tmp_path: Path) -> None:
    bucket = f"locked-{uuid.uuid4().hex[:12]}"
    minio.create_bucket(bucket, object_lock=True)
    store = Repository.init(open_backend(f"s3://{bucket}/dr"), passphrase=PASSPHRASE)
    old = [backup_files(store, tmp_path / "a", noise(200_000, seed), "a") for seed in range(3)]
    client = minio.client()
    until = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    locked_manifest = f"dr/{layout.manifest(old[0])}"
    client.put_object_retention(
        Bucket=bucket, Key=locked_manifest, Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until}
    )
    locked_chunk = sorted(chunks_of(store, old[1]) - chunks_of(store, old[2]))[0]
    holder = stores.where(store, locked_chunk)[0]  # format 2: the pack that holds the chunk
    client.put_object_legal_hold(Bucket=bucket, Key=f"dr/{holder}", LegalHold={"Status": "ON"})

    report = prune(store, {"a": RetentionPolicy(keep_last=1)})

    assert report.forgotten == [old[1]]  # old[0]'s manifest is under retention: it stays, and says why
    assert report.locked_objects[layout.manifest(old[0])].startswith("governance retention until ")
    assert report.locked_objects[holder] == "legal hold"
    assert set(store.backup_ids()) == {old[0], old[2]}
    assert locked_chunk in set(store.chunk_ids())
    assert check(store, read_data=True).ok
    client.put_object_legal_hold(Bucket=bucket, Key=f"dr/{holder}", LegalHold={"Status": "OFF"})
    dead = chunks_of_pack(store, holder)
    again = prune(store, {"a": RetentionPolicy(keep_last=1)})
    assert again.chunks_deleted == len(dead) and again.packs_deleted == 1
    assert locked_chunk not in set(store.chunk_ids()) and check(store, read_data=True).ok
