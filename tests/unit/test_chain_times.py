"""Delta chains judged by when the store received each link (drtool/repo/chains.py), without a server.

A key holder can write a link *now* stating any seq, position and time. What it cannot do is have the store
receive it in the past. These tests build chains of links with stated and store times and check which links
a point-in-time restore starts from and replays; tests/store/test_hostile_times.py runs the attacks on real etcd
chains through the CLI, on a local store and MinIO.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from drtool.errors import NotFound
from drtool.plugin.contract import Point
from drtool.repo.chains import ChainGap, Link, build_chains, late_folds, plan_point, review_links
from tests.fixtures.core import Cli, assert_clean_error

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
SKEW = dt.timedelta(minutes=5)
BASE = "20261201T120000Z-000000"


def link(
    backup_id: str, kind: str, seq: int, last: int, minute: float, stored: float | None = None, base: str = BASE
) -> Link:
    """A link of chain ``base`` at revision ``last``, stated at T0 + ``minute``, received at T0 + ``stored``
    (by default one second after the time it states, as a follower writes it)."""
    at = T0 + dt.timedelta(minutes=minute)
    received = at + dt.timedelta(seconds=1) if stored is None else T0 + dt.timedelta(minutes=stored)
    first = None if kind == "full" else last - 9
    return Link(backup_id, kind, "etcd", "follow", base, seq, first, last, None, at, received, manifest=None)  # type: ignore[arg-type]


def genuine() -> list[Link]:
    """A full at revision 100, then a delta every minute of 10 revisions each (seq 1..10, up to 200)."""
    return [link(BASE, "full", 0, 100, 0)] + [link(f"d{i}", "delta", i, 100 + 10 * i, i) for i in range(1, 11)]


def plan(links: list[Link], at: str, **kwargs: Any) -> Any:
    return plan_point(build_chains(links, SKEW, **kwargs), Point.parse(at), SKEW)


def at_minute(minute: float) -> str:
    return (T0 + dt.timedelta(minutes=minute)).isoformat()


def test_a_fold_written_now_serves_only_the_points_after_it_was_received() -> None:
    """The issue's attack, and a legitimate `drtool compact`: both are a full at a delta's seq with that
    delta's position and time, received later. Points before it was received replay the chain."""
    fold = link("fold", "full", 4, 140, 4, stored=60)  # folded (or forged) an hour after delta 4
    links = [*genuine(), fold]
    before = plan(links, at_minute(5.5))
    assert before.base.backup_id == BASE and [d.seq for d in before.deltas] == [1, 2, 3, 4, 5, 6]
    assert before.passed_over == [fold]
    by_revision = plan(links, "145")  # revision 145 was received with delta 5, before the fold
    assert by_revision.base.backup_id == BASE
    trusted = plan(links, at_minute(5.5), trust_compacted=True)
    assert trusted.base.backup_id == "fold" and [d.seq for d in trusted.deltas] == [5, 6]
    assert plan(links, "latest").base.backup_id == "fold"  # the store holds it now: latest starts there
    late = [*genuine(), link("d11", "delta", 11, 210, 61, stored=61.1)]
    assert plan([*late, fold], "205").base.backup_id == "fold"  # received after the fold was
    assert set(late_folds(build_chains(links, SKEW)[0], SKEW)) == {"fold"}
    pruned = [fold, *(d for d in genuine() if d.seq > 4)]  # retention forgot the full and deltas before the fold
    with pytest.raises(NotFound, match="received later"):
        plan(pruned, at_minute(5.5))
    assert plan(pruned, at_minute(5.5), trust_compacted=True).base.backup_id == "fold"


def test_a_reused_seq_is_never_used_and_the_first_received_link_keeps_it() -> None:
    fold = link("fold", "full", 4, 140, 4, stored=4.1)  # a compaction right after delta 4
    again = link("fold-again", "full", 4, 140, 4, stored=60)
    twin = link("d3-again", "delta", 3, 130, 3, stored=60)
    links = [*genuine(), fold, again, twin]
    chain = build_chains(links, SKEW)[0]
    assert set(chain.doubtful) == {"fold-again", "d3-again"}
    assert "reuses seq 3" in chain.doubtful["d3-again"] and "which d3 holds" in chain.doubtful["d3-again"]
    result = plan(links, at_minute(5.5))
    assert result.base.backup_id == "fold" and [d.backup_id for d in result.deltas] == ["d5", "d6"]
    assert [d.backup_id for d in plan(links, "115").deltas] == ["d1", "d2"]
    trusted = build_chains(links, SKEW, trust_compacted=True)[0]
    assert set(trusted.doubtful) == {"d3-again"}  # two compactions may race; a delta has one writer
    doubtful, _ = review_links(links, SKEW)
    assert set(doubtful) == {"fold-again", "d3-again"}


@pytest.mark.parametrize(
    ("forged", "why"),
    [
        (link("late", "delta", 3, 130, 3, stored=60), None),  # fills a gap (delta 3 pruned), an hour late
        (link("odd-fold", "full", 4, 140, 2, stored=60), "does not match the delta it folds"),
        (link("odd-fold", "full", 4, 139, 4, stored=60), "does not match the delta it folds"),
        (link("start", "full", 0, 100, 0, stored=60), "claims to start chain"),
    ],
    ids=["late-delta", "fold-time", "fold-revision", "second-start"],
)
def test_links_the_store_received_out_of_order_are_never_used(forged: Link, why: str | None) -> None:
    links = [link_ for link_ in genuine() if forged.backup_id != "late" or link_.seq != 3] + [forged]
    chain = build_chains(links, SKEW, trust_compacted=True)[0]
    assert forged.backup_id in chain.doubtful, chain.doubtful
    assert why is None or why in chain.doubtful[forged.backup_id]
    if forged.backup_id == "late":
        assert "after delta seq 4" in chain.doubtful["late"]
        with pytest.raises(ChainGap, match="missing link"):
            plan(links, at_minute(5.5))
    else:
        assert plan(links, at_minute(5.5), trust_compacted=True).base.backup_id == BASE


def test_a_chain_written_now_that_claims_an_old_start_is_not_chosen_for_an_old_point() -> None:
    other = "20261201T115900Z-ffffff"
    forged = [link(other, "full", 0, 120, 1.5, stored=60, base=other), link("fd1", "delta", 1, 300, 9, 60, other)]
    for point in (at_minute(5.5), "150"):
        result = plan([*genuine(), *forged], point)
        assert result.chain.base == BASE and result.base.backup_id == BASE, point


def test_trust_compacted_goes_with_at(cli: Cli) -> None:
    assert_clean_error(cli("restore", "latest", "-p", "etcd", "--trust-compacted"), 2, "goes with --at")


@pytest.mark.parametrize("missing", [1, 2])
def test_a_hole_after_the_point_does_not_refuse_the_point(missing: int) -> None:
    """The point the full (or the delta before the hole) already holds restores; only points past the hole are
    refused, naming the revisions lost. CI once lost the first delta and refused the full's own revision."""
    links = [x for x in genuine() if x.seq != missing]
    held = 100 + 10 * (missing - 1)
    result = plan(links, str(held))
    assert [d.seq for d in result.deltas] == list(range(1, missing))
    with pytest.raises(ChainGap, match=f"revisions {held + 1}..{held + 10} are not in the store"):
        plan(links, str(held + 1))
