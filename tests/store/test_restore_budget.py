"""The restore memory bound: every artifact a plugin opens through one restore context reads ahead out of
one byte budget, so N objects restored at once hold about what one holds (docs/performance.md).

The bytes in flight are counted outside the reader, by a spy around the store's fetches: bytes a fetch
returned minus bytes the plugin has read. Without the budget, four readers each fetching ``2 x workers``
runs ahead would hold several times the bound asserted here.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import wait

import pytest

from drtool.backends.local import LocalBackend
from drtool.memory import ByteBudget
from drtool.repo import packed
from drtool.repo.chunks import ChunkRef, Fetch, Verified
from drtool.repo.config import ChunkerParams, PackParams, StoreConfig
from drtool.repo.reader import ArtifactReader
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from tests.fixtures.core import PASSPHRASE

KiB, MiB = 1024, 1024 * 1024
SMALL_CHUNKS = ChunkerParams(min_size=16 * KiB, avg_size=64 * KiB, max_size=128 * KiB)


@pytest.fixture(params=[2, 1], ids=["format2", "format1"])
def repo(request: pytest.FixtureRequest, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Repository:
    """Small chunks and runs, so a 4 MiB artifact is dozens of fetches: read-ahead is what fills memory."""
    monkeypatch.setattr(packed, "RUN_BYTES", 256 * KiB)
    overrides = {"packs": PackParams(target_size=1 * MiB)} if request.param == 2 else {}
    config = StoreConfig.new(version=request.param, chunker=SMALL_CHUNKS, **overrides)
    return Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE, config=config)


class InFlight:
    """Bytes fetched from the store and not yet read by the plugin, and their peak."""

    def __init__(self) -> None:
        self.fetched = self.consumed = self.peak = self.largest_fetch = 0
        self._lock = threading.Lock()

    def spy_on(self, repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
        reads = repo.chunks.reads

        def counted(chunks: list[ChunkRef]) -> Iterator[Fetch]:
            for fetch in reads(chunks):
                yield Fetch(fetch.size, lambda run=fetch.run: self._fetched(run()))

        monkeypatch.setattr(repo.chunks, "reads", counted)

    def _fetched(self, verified: list[Verified]) -> list[Verified]:
        n = sum(len(data) for _, data in verified)
        with self._lock:
            self.fetched += n
            self.largest_fetch = max(self.largest_fetch, n)
            self.peak = max(self.peak, self.fetched - self.consumed)
        return verified

    def read(self, n: int) -> None:
        with self._lock:
            self.consumed += n


def _settle(reader: ArtifactReader) -> None:
    """Let every fetch the reader started finish: the worst case for memory, and no timing in the test."""
    wait(list(reader._pending))


def test_readers_of_one_restore_share_one_byte_budget(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    data = {f"shard-{i}": random.Random(i).randbytes(4 * MiB) for i in range(4)}
    with BackupSession(repo) as session:
        ctx = session.context_for("test")
        for name, content in data.items():
            with ctx.artifact(name) as sink:
                sink.write(content)
        manifest = session.commit()

    spy = InFlight()
    spy.spy_on(repo, monkeypatch)
    limit = 512 * KiB  # less than one fetch per reader: each reader's first fetch overdraws it
    budget = ByteBudget(limit)
    rctx = PluginRestoreContext(repo, manifest, "test", workers=4, budget=budget)
    got: dict[str, bytearray] = {name: bytearray() for name in data}
    with (
        rctx.open("shard-0") as r0,
        rctx.open("shard-1") as r1,
        rctx.open("shard-2") as r2,
        rctx.open("shard-3") as r3,
    ):
        readers = {"shard-0": r0, "shard-1": r1, "shard-2": r2, "shard-3": r3}
        while readers:  # one thread reads all four in turn: a plugin interleaving its uploads
            for name, reader in list(readers.items()):
                piece = reader.read(48 * KiB)
                spy.read(len(piece))
                got[name] += piece
                if not piece:
                    del readers[name]
                else:
                    _settle(reader)
                assert budget.used <= limit + len(data) * spy.largest_fetch
    assert {name: bytes(content) for name, content in got.items()} == data
    assert spy.fetched == sum(map(len, data.values()))
    assert spy.largest_fetch <= 256 * KiB
    # the bound: the shared limit, plus the one fetch each open reader may always have
    assert spy.peak <= limit + len(data) * spy.largest_fetch
    assert budget.used == 0


def test_a_reader_closed_early_gives_its_budget_back(repo: Repository) -> None:
    with BackupSession(repo) as session:
        with session.context_for("test").artifact("big") as sink:
            sink.write(random.Random(7).randbytes(4 * MiB))
        manifest = session.commit()
    budget = ByteBudget(1 * MiB)
    rctx = PluginRestoreContext(repo, manifest, "test", workers=4, budget=budget)
    with rctx.open("big") as reader:
        assert len(reader.read(100 * KiB)) == 100 * KiB
        _settle(reader)
        assert 0 < budget.used <= 1 * MiB + 256 * KiB
    assert budget.used == 0
