"""The store format: streaming round trips, dedup, atomic publish, and corruption detection, in format 2
(packs, the default) and format 1 (a chunk per object, which stores made before format 2 keep using)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

from drtool.backends.local import LocalBackend
from drtool.errors import IntegrityError, NotFound
from drtool.repo import layout
from drtool.repo.check import check
from drtool.repo.config import PackParams, StoreConfig
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from tests.fixtures import stores
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.noise import noise, seeded_store_keys


@pytest.fixture(params=[2, 1], ids=["format2", "format1"])
def repo(request: pytest.FixtureRequest, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Repository:
    seeded_store_keys(monkeypatch)  # the shapes these tests need (chunks to swap, what an insert re-stores)
    config = StoreConfig.new(version=request.param)
    return Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE, config=config)


def _backup(repo: Repository, artifacts: dict[str, bytes], piece: int = 65536) -> Manifest:
    with BackupSession(repo) as session:
        ctx = session.context_for("test")
        for name, data in artifacts.items():
            with ctx.artifact(name, meta={"n": len(data)}) as sink:
                for i in range(0, len(data), piece):
                    sink.write(data[i : i + piece])
        return session.commit()


def _read(repo: Repository, backup_id: str, name: str) -> bytes:
    with PluginRestoreContext(repo, repo.find_backup(backup_id), "test").open(name) as source:
        return source.read()


def test_round_trip_through_a_fresh_open(repo: Repository, reopen: Callable[[Repository], Repository]) -> None:
    data = {"big.bin": noise(9 * 1024 * 1024 + 17, seed=1), "empty": b"", "small.txt": b"hello"}
    manifest = _backup(repo, data)
    fresh = reopen(repo)
    assert fresh.backup_ids() == [manifest.id]
    for name, content in data.items():
        assert _read(fresh, manifest.id, name) == content
    entry = {a.name: a for a in manifest.artifacts}["big.bin"]
    assert entry.sha256 == hashlib.sha256(data["big.bin"]).hexdigest()
    assert len(entry.chunks) > 2


def test_chunking_is_independent_of_write_sizes(repo: Repository) -> None:
    data = noise(6 * 1024 * 1024, seed=2)
    a = _backup(repo, {"x": data}, piece=4096)
    b = _backup(repo, {"x": data}, piece=3 * 1024 * 1024 + 1)
    assert a.artifacts[0].chunks == b.artifacts[0].chunks
    assert b.stats["bytes_stored"] == 0


def test_unchanged_data_uploads_nothing_and_an_insert_little(repo: Repository) -> None:
    data = bytearray(noise(12 * 1024 * 1024, seed=3))
    first = _backup(repo, {"x": bytes(data)})
    again = _backup(repo, {"x": bytes(data)})
    assert again.stats["bytes_stored"] == 0 and again.stats["chunks_new"] == 0
    data[5_000_000:5_000_000] = b"inserted bytes shift everything after them"
    shifted = _backup(repo, {"x": bytes(data)})
    assert 0 < shifted.stats["bytes_stored"] < 0.35 * first.stats["bytes_stored"]


def test_compressible_data_is_compressed_and_chunk_ids_are_keyed(repo: Repository) -> None:
    data = b"apiVersion: v1\nkind: ConfigMap\n" * 200_000
    manifest = _backup(repo, {"yaml": data})
    stored = sum(stores.stored_size(repo, c) for c, _ in manifest.artifacts[0].chunks)
    assert stored < len(data) / 10
    chunk_id, length = manifest.artifacts[0].chunks[0]
    assert chunk_id != hashlib.sha256(data[:length]).hexdigest()  # ids reveal nothing without the key
    assert chunk_id != hashlib.blake2b(data[:length], digest_size=32).hexdigest()
    for name in stores.chunk_objects(repo):
        assert b"ConfigMap" not in repo.backend.get(name)


def test_failed_artifact_leaves_no_visible_backup(repo: Repository) -> None:
    with pytest.raises(RuntimeError), BackupSession(repo) as session, session.context_for("test").artifact("x") as sink:
        sink.write(noise(5 * 1024 * 1024, seed=4))
        raise RuntimeError("source died")
    assert repo.backup_ids() == []


def test_flipped_byte_in_chunk_is_detected(repo: Repository) -> None:
    manifest = _backup(repo, {"x": noise(9 * 1024 * 1024, seed=5)})  # chunks are at most 4 MiB: at least three
    stores.flip_byte(repo, manifest.artifacts[0].chunks[1][0])
    with pytest.raises(IntegrityError, match="failed authentication"):
        _read(repo, manifest.id, "x")


def test_swapped_chunks_are_detected(repo: Repository) -> None:
    manifest = _backup(repo, {"x": noise(9 * 1024 * 1024, seed=6)})  # at least three chunks: two to swap
    (a, _), (b, _) = manifest.artifacts[0].chunks[:2]
    blob_a, blob_b = stores.sealed_bytes(repo, a), stores.sealed_bytes(repo, b)
    stores.overwrite(repo, a, blob_b)
    stores.overwrite(repo, b, blob_a)
    with pytest.raises(IntegrityError):
        _read(repo, manifest.id, "x")


def test_flipped_byte_in_manifest_and_foreign_manifest(repo: Repository, tmp_path) -> None:
    manifest = _backup(repo, {"x": b"data"})
    name = layout.manifest(manifest.id)
    original = repo.backend.get(name)
    blob = bytearray(original)
    blob[-5] ^= 0x80
    repo.backend.put(name, bytes(blob))
    with pytest.raises(IntegrityError, match="manifest"):
        repo.get_manifest(manifest.id)
    # a genuine manifest of this store renamed to another backup id does not authenticate either
    repo.backend.put(name, original)
    repo.backend.put(layout.manifest("20200101T000000Z-abcdef"), original)
    with pytest.raises(IntegrityError):
        repo.get_manifest("20200101T000000Z-abcdef")


def test_check_names_a_damaged_pack_and_what_it_took_down(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format 2: a pack cut short names the pack and every chunk in it; a pack whose header alone is damaged
    is named, but none of its chunks (they still open where the index places them)."""
    seeded_store_keys(monkeypatch)  # two packs at least, the same ones every run
    config = StoreConfig.new(packs=PackParams(target_size=2 * 1024 * 1024))
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE, config=config)
    manifest = _backup(repo, {"x": noise(6 * 1024 * 1024, seed=7)})
    assert check(repo, read_data=True).ok
    cut, header_only = stores.chunk_objects(repo)[:2]
    repo.backend.put(cut, repo.backend.get(cut)[:1000])
    blob = bytearray(repo.backend.get(header_only))
    blob[-10] ^= 0x01  # in the sealed header, just before its 4-byte length
    repo.backend.put(header_only, bytes(blob))
    report = check(repo, read_data=True)
    assert not report.ok
    assert set(report.damaged_packs) == {layout.pack_id_of(cut), layout.pack_id_of(header_only)}
    assert set(report.damaged_chunks) == stores.holding(repo, cut)
    assert all("shorter than its index says" in why for why in report.damaged_chunks.values())
    repo.backend.delete(cut)
    report = check(repo)
    assert report.missing_packs == {layout.pack_id_of(cut): [manifest.id]}
    assert set(report.missing_chunks) == stores.holding(repo, cut)


def test_missing_chunk_fails_preflight_before_any_read(repo: Repository) -> None:
    manifest = _backup(repo, {"x": noise(3 * 1024 * 1024, seed=8)})
    stores.remove(repo, manifest.artifacts[0].chunks[-1][0])
    ctx = PluginRestoreContext(repo, manifest, "test")
    with pytest.raises(IntegrityError, match=r"missing \d+ chunk"):
        ctx.preflight()


def test_unknown_backup_and_latest(repo: Repository) -> None:
    with pytest.raises(NotFound, match="no backups yet"):
        repo.resolve("latest")
    first = _backup(repo, {"x": b"1"})
    second = _backup(repo, {"x": b"2"})
    assert repo.resolve("latest") == second.id != first.id
    with pytest.raises(NotFound):
        repo.get_manifest("20990101T000000Z-000000")
    with pytest.raises(NotFound):
        repo.resolve("1999")


def _backup_as(repo: Repository, backup_id: str, data: bytes) -> Manifest:
    with BackupSession(repo, backup_id=backup_id) as session:
        with session.context_for("test").artifact("x") as sink:
            sink.write(data)
        return session.commit()


def test_latest_within_one_second_is_the_one_made_last_not_the_highest_suffix(repo: Repository) -> None:
    """Before: ids of one second sorted by their random suffix, so `latest` was the older backup about half
    the time when two were made in the same second (a fresh-clone run restored the first of two backups)."""
    older = _backup_as(repo, "20261205T224327Z-ffffff", b"older")
    _backup_as(repo, "20261205T224327Z-888888", b"middle")
    newest = _backup_as(repo, "20261205T224327Z-000000", b"newest")
    assert repo.resolve("latest") == newest.id
    assert _read(repo, "latest", "x") == b"newest"
    later = _backup_as(repo, "20261205T224328Z-000000", b"a second later")
    assert repo.resolve("latest") == later.id != older.id


def test_artifact_names_are_checked(repo: Repository) -> None:
    from drtool.errors import UsageError

    with BackupSession(repo) as session:
        ctx = session.context_for("test")
        for bad in ("../escape", "/abs", ""):
            with pytest.raises(UsageError), ctx.artifact(bad):
                pass


def test_an_interrupted_write_surfaces_its_own_error(repo: Repository) -> None:
    """A signal handler raising mid-write (the scheduler's SIGTERM) must surface as itself: the writes a
    tarfile makes while unwinding must not fail with BufferError on the chunker's pinned buffer."""

    class Interrupted(Exception):
        pass

    data = noise(20 * 1024 * 1024, seed=9)
    with pytest.raises(Interrupted), BackupSession(repo) as session:
        ctx = session.context_for("files")
        with ctx.artifact("a") as sink:
            chunker = sink._chunker  # type: ignore[attr-defined]
            real_cut = chunker._cdc.cut_buf

            def interrupted_cut(view: memoryview):  # type: ignore[no-untyped-def]
                yield next(iter(real_cut(view)))
                raise Interrupted

            chunker._cdc = type("Cdc", (), {"cut_buf": staticmethod(interrupted_cut)})()
            try:
                sink.write(data)
            finally:  # what tarfile's __exit__ does while the exception is alive
                sink.write(b"trailer")
    assert repo.backup_ids() == []
