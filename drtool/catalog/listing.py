"""What `drtool list` shows: one line per backup, a delta chain's deltas summarized on the full before them.

A follower writes a delta every 20 s (4320 a day); listing each would bury the full backups. Each full of a
chain shows how many deltas follow it (up to the chain's next full), the revisions they reach and when.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from drtool.catalog.models import BackupRow, ChainRow
from drtool.repo.times import newness, suspicion


def backup_listing(
    rows: Iterable[BackupRow], links: Mapping[str, ChainRow], *, with_deltas: bool = False
) -> list[dict[str, Any]]:
    """Rows as dicts with ``kind`` and ``chain``; deltas only with ``with_deltas``, else counted on their full."""
    rows = list(rows)
    stored = {r.id: r.bytes_stored for r in rows}
    followers: dict[str, list[ChainRow]] = {}  # full's backup id -> the deltas after it
    by_chain: dict[str, list[ChainRow]] = {}
    for link in links.values():
        by_chain.setdefault(link.base, []).append(link)
    for chain in by_chain.values():
        chain.sort(key=lambda link: (link.seq, link.kind == "full"))  # a fold follows the delta it folds up to
        current: ChainRow | None = None
        for link in chain:
            if link.kind == "full":
                current = link
                followers[link.backup_id] = []
            elif current is not None:
                followers[current.backup_id].append(link)
    out = []
    for row in rows:
        link = links.get(row.id)
        if link is not None and link.kind == "delta" and not with_deltas:
            continue
        entry: dict[str, Any] = row.model_dump() | {"kind": link.kind if link else "full", "chain": None}
        if link is not None:
            entry["chain"] = link.model_dump(exclude={"backup_id", "kind"})
            after = followers.get(row.id)
            if after:
                entry["chain"]["deltas"] = {
                    "count": len(after),
                    "last": after[-1].last,
                    "last_time": after[-1].last_time,
                    "bytes_stored": sum(stored.get(d.backup_id, 0) for d in after),
                }
        out.append(entry)
    return out


def chain_text(entry: Mapping[str, Any]) -> str:
    """The `chain` column: where a backup sits in its chain, in a few words."""
    chain = entry.get("chain")
    if not chain:
        return ""
    if entry["kind"] == "delta":
        return f"delta #{chain['seq']} rev {chain['first']}..{chain['last']}"
    what = "folded full" if chain["seq"] else "full"
    deltas = chain.get("deltas")
    if not deltas:
        return f"{what} at rev {chain['last']}"
    return (
        f"{what} at rev {chain['last']} + {deltas['count']} deltas to rev {deltas['last']} ({deltas['last_time'][:19]})"
    )


def flag_entries(entries: list[dict[str, Any]], stored: Mapping[str, dt.datetime], max_skew: dt.timedelta) -> None:
    """Set each entry's ``flag``: why its times disagree with when the store received its manifest
    (``stored``, from one listing; drtool/repo/times.py), or None."""
    for e in entries:
        chain_time = (e["chain"] or {}).get("last_time")
        e["flag"] = suspicion(e["id"], e["started"], e["finished"], stored.get(e["id"]), max_skew, chain_time)


def newest_complete(
    rows: Iterable[BackupRow], sets: Iterable[str], stored: Mapping[str, dt.datetime], max_skew: dt.timedelta
) -> dict[str, BackupRow]:
    """Per backup set, its newest complete backup whose times the store's clock vouches for: what the RPO age
    counts from (a forged manifest dated into the future must not make a stopped schedule look fresh)."""
    wanted, newest = set(sets), {}
    for row in rows:
        vouched = suspicion(row.id, row.started, row.finished, stored.get(row.id), max_skew) is None
        if row.backup_set in wanted and row.status == "complete" and vouched:
            held = newest.get(row.backup_set)
            if held is None or _newness(row) > _newness(held):  # not id order: ids of one second sort at random
                newest[row.backup_set] = row
    return newest


def _newness(row: BackupRow) -> tuple[str, str, str, str]:
    return newness(row.id, row.finished, row.started)
