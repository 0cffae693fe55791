"""Which links a standby applies (drtool/standby/links.py): chain order, resuming after a position, a new
chain, and what does not authenticate (a damaged chunk, a garbage manifest) skipped and reported."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from drtool.follow import FollowSession, TipLink
from drtool.plugin.contract import BackupContext, Span
from drtool.repo import layout
from drtool.repo.repository import Repository
from drtool.standby.links import LinkWatcher, Position, authenticate, iso

SET = "prod"
PLUGIN = "kubernetes"


def _writer(position: int, payload: bytes):  # type: ignore[no-untyped-def]
    def write(ctx: BackupContext) -> tuple[dict[str, int], Span]:
        with ctx.artifact("objects") as sink:
            sink.write(payload)
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"n": position}, Span(None if position == 0 else position, position, None, now)

    return write


def _chain(repo: Repository, deltas: int) -> list[TipLink]:
    session = FollowSession(repo, PLUGIN, SET)
    tips = [session.write_full(_writer(0, b"full " * 100))]
    for n in range(1, deltas + 1):
        tips.append(session.write_delta(tips[-1], _writer(n, f"delta {n} ".encode() * 50)))
    return tips


def _position(tip: TipLink) -> Position:
    link = tip.link
    return Position(link.base, link.seq, link.backup_id, iso(link.stored) if link.stored else None, iso(link.last_time))


def test_links_come_in_chain_order_and_resume_after_the_position(repo: Repository) -> None:
    tips = _chain(repo, 3)
    watcher = LinkWatcher(repo, SET, [PLUGIN])
    first = watcher.poll({})
    assert [link.seq for link in first.links] == [0, 1, 2, 3]
    assert not first.skipped and first.newest_stored is not None
    later = watcher.poll({PLUGIN: _position(tips[1])})
    assert [link.backup_id for link in later.links] == [t.link.backup_id for t in tips[2:]]


def test_a_new_chain_starts_from_its_full(repo: Repository) -> None:
    old = _chain(repo, 2)
    new = FollowSession(repo, PLUGIN, SET).write_full(_writer(10, b"new full"))
    pending = LinkWatcher(repo, SET, [PLUGIN]).poll({PLUGIN: _position(old[-1])})
    assert [link.backup_id for link in pending.links] == [new.link.backup_id]


def test_other_sets_and_plugins_are_not_followed(repo: Repository) -> None:
    _chain(repo, 1)
    assert LinkWatcher(repo, "other", [PLUGIN]).poll({}).links == []
    assert LinkWatcher(repo, SET, ["kueue"]).poll({}).links == []


def test_a_damaged_chunk_fails_authentication(repo: Repository, reopen: Callable[[Repository], Repository]) -> None:
    tips = _chain(repo, 2)
    manifest = tips[2].link.manifest
    assert authenticate(repo, manifest, PLUGIN) is None
    store = Path(repo.backend.url)
    entry = manifest.artifacts_of(PLUGIN)[0]
    chunk_ids = {cid for cid, _ in entry.chunks}
    damaged = 0
    for path in store.rglob("*"):
        if path.is_file() and (path.name in chunk_ids or path.parent.name == "packs" or "packs" in path.parts):
            data = bytearray(path.read_bytes())
            data[:] = bytes(len(data))  # every byte: one flipped byte may be in a pack header, which reads do not use
            path.write_bytes(bytes(data))
            damaged += 1
    assert damaged
    reason = authenticate(reopen(repo), manifest, PLUGIN)
    assert reason is not None and "authentic" in reason


def test_a_manifest_that_does_not_open_is_skipped_and_reported(repo: Repository) -> None:
    tips = _chain(repo, 2)
    bad = tips[1].link.backup_id
    repo.backend.put(layout.manifest(bad), b"x" * 64)
    pending = LinkWatcher(repo, SET, [PLUGIN]).poll({})
    assert [s.name for s in pending.skipped] == [bad]
    assert "does not authenticate" in pending.skipped[0].reason
    assert bad not in [link.backup_id for link in pending.links]


def test_links_stored_after_a_fence_are_skipped(repo: Repository) -> None:
    _chain(repo, 2)
    links = LinkWatcher(repo, SET, [PLUGIN]).poll({}).links
    fence_time = links[0].stored
    assert fence_time is not None
    pending = LinkWatcher(repo, SET, [PLUGIN]).poll({}, fenced_after=fence_time)
    late = {link.backup_id for link in links if link.stored and link.stored > fence_time}
    assert late and {s.name for s in pending.skipped} == late
    assert not late & {link.backup_id for link in pending.links}


def test_a_long_running_standby_sees_the_chunks_of_links_written_after_it_opened(
    repo: Repository, reopen: Callable[[Repository], Repository]
) -> None:
    """The follower is another process: its packs are in index objects the standby's store had not read."""
    standby = reopen(repo)
    watcher = LinkWatcher(standby, SET, [PLUGIN])
    standby.chunks.missing(set(), 1)  # its index is read before the follower writes anything
    _chain(repo, 2)
    for link in watcher.poll({}).links:
        assert authenticate(standby, link.manifest, PLUGIN) is None, link.backup_id
