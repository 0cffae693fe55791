"""Every byte of a pack is authenticated by something (docs/store-format.md, "Packs"; docs/threat-model.md).

A pack is ``blob_1 || ... || blob_n || sealed header || u32 header length``. Reads (restore, the standby's
verified reads) find a blob through the sealed index and never parse the pack's header or trailer, so a
changed byte there leaves every read working and returning the true data, while a changed byte in a blob
fails the read of that blob. `drtool check --read-data` opens the header too and names the pack. So each
single-byte change is detected by check, and no read ever returns altered data: that is what these tests
sweep, byte by byte, over a small pack like the standby's (a 126-byte pack whose middle byte is in the header).
"""

from __future__ import annotations

import pytest

from drtool.errors import IntegrityError
from drtool.repo import layout
from drtool.repo.check import check
from drtool.repo.pack import TRAILER
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.standby.links import authenticate
from tests.fixtures import stores
from tests.fixtures.core import Cli

PLUGIN = "kubernetes"
ARTIFACTS = {"objects": b"delta 1 " * 50, "status": b"status of the cluster " * 20}  # one small blob each


def _backup(repo: Repository) -> str:
    with BackupSession(repo) as session:
        ctx = session.context_for(PLUGIN)
        for name, data in ARTIFACTS.items():
            with ctx.artifact(name) as sink:
                sink.write(data)
        return session.commit().id


def _reads(repo: Repository, backup_id: str) -> dict[str, bytes | None]:
    """What a restore reads of each artifact: its bytes, or None when the read failed authentication."""
    manifest = repo.find_backup(backup_id)
    out: dict[str, bytes | None] = {}
    for name in (entry.name for entry in manifest.artifacts_of(PLUGIN)):
        try:
            with PluginRestoreContext(repo, manifest, PLUGIN).open(name) as source:
                out[name] = source.read()
        except IntegrityError:
            out[name] = None
    return out


def _regions(repo: Repository, pack: str) -> dict[int, str]:
    """Byte position -> the artifact whose blob holds it, or "header" / "trailer"."""
    size = repo.backend.size(pack)
    where = dict.fromkeys(range(size - TRAILER.size), "header")
    where.update(dict.fromkeys(range(size - TRAILER.size, size), "trailer"))
    manifest = repo.find_backup(repo.backup_ids()[0])
    for entry in manifest.artifacts:
        _, offset, length = stores.where(repo, entry.chunks[0][0])
        where.update(dict.fromkeys(range(offset, offset + length), entry.name))
    return where


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def store(request: pytest.FixtureRequest, cli: Cli) -> tuple[Cli, str]:
    if request.param == "local":
        url = str(cli.home.parent / "store")
    else:
        cli.env.update(request.getfixturevalue("minio_env"))  # the CLI child reaches MinIO as a user would
        url = request.getfixturevalue("s3_store_url")
    stores.init(cli, url)
    return cli, url


@pytest.mark.parametrize("mask", [0x01, 0x80])
def test_every_changed_byte_of_a_pack_fails_its_read_or_check_and_no_read_returns_altered_data(
    store: tuple[Cli, str], mask: int
) -> None:
    cli, url = store
    repo = stores.open_repo(cli, url)
    backup_id = _backup(repo)
    (pack,) = stores.chunk_objects(repo)
    original = repo.backend.get(pack)
    regions = _regions(repo, pack)
    assert set(regions.values()) == {*ARTIFACTS, "header", "trailer"}
    manifest = repo.find_backup(backup_id)
    assert _reads(repo, backup_id) == ARTIFACTS and authenticate(repo, manifest, PLUGIN) is None
    assert check(repo, read_data=True).ok
    for position, region in regions.items():
        changed = bytearray(original)
        changed[position] ^= mask
        repo.backend.put(pack, bytes(changed))
        reads = _reads(repo, backup_id)
        for name, data in reads.items():  # a read fails or returns the true bytes, never others
            assert data is None or data == ARTIFACTS[name], (position, region, name)
        assert [name for name, data in reads.items() if data is None] == [n for n in ARTIFACTS if n == region]
        standby = authenticate(repo, manifest, PLUGIN)
        assert (standby is None) == (region in ("header", "trailer")), (position, region, standby)
        report = check(repo, read_data=True)
        assert not report.ok, (position, region)
        if region in ARTIFACTS:
            (entry,) = [e for e in manifest.artifacts_of(PLUGIN) if e.name == region]
            assert set(report.damaged_chunks) == {chunk_id for chunk_id, _ in entry.chunks}
        else:  # the header or its length: the pack is named, its chunks still open where the index puts them
            assert set(report.damaged_packs) == {layout.pack_id_of(pack)} and not report.damaged_chunks
    repo.backend.put(pack, original)
    assert check(repo, read_data=True).ok


def test_check_read_data_names_a_pack_whose_header_byte_was_changed(store: tuple[Cli, str]) -> None:
    """The standby report's case, through the commands a user runs: the middle byte of a one-blob pack is in its
    sealed header; the restore still returns the true data and `drtool check --read-data` fails naming the pack."""
    cli, url = store
    repo = stores.open_repo(cli, url)
    with BackupSession(repo) as session:
        with session.context_for(PLUGIN).artifact("objects") as sink:
            sink.write(ARTIFACTS["objects"])
        backup_id = session.commit().id
    (pack,) = stores.chunk_objects(repo)
    data = bytearray(repo.backend.get(pack))
    middle = len(data) // 2
    assert _regions(repo, pack)[middle] == "header"
    data[middle] ^= 0x01
    repo.backend.put(pack, bytes(data))
    assert _reads(repo, backup_id)["objects"] == ARTIFACTS["objects"]
    proc = cli("check", "--read-data")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"damaged pack {layout.pack_id_of(pack)[:16]}" in proc.stdout, proc.stdout
