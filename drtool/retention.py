"""Which backups of one backup set to keep: a pure function of the backups, a policy and the current time.

Rules follow restic's ``forget`` (docs/retention.md): ``keep_last`` keeps the N newest; ``keep_hourly`` ...
``keep_yearly`` keep the newest backup of each of the N most recent hours/days/ISO weeks/months/years that
have one (grandfather-father-son); ``keep_within`` keeps everything younger than a duration; backups
carrying one of ``keep_tags`` (milestones) are never forgotten. Two safety rules come first: a set's newest
complete backup is always kept, and an empty policy keeps everything (forgetting must be asked for).

Only complete backups fill the count rules: a partial backup (a plugin failed) must not take the daily
slot of a complete one; partial backups stay only while ``keep_within`` or a tag covers them.
Every decision carries its reasons, so `drtool prune --dry-run` can say why each backup stays.

A backup's time is when it finished, as the store's clock vouches for it (drtool/repo/times.py). A
*flagged* backup (its stated times disagree with that clock: dated into the future or the past) fills no
rule, is never the newest, and is always kept for the operator to look at, so forged manifests can neither
crowd genuine backups out of their slots nor be forgotten in their place (docs/threat-model.md).

Delta chains (docs/retention.md, "Delta chains"): deltas never fill the count rules (fulls do). The
newest chain's tip stays reachable (its newest full and the deltas after it), ``pitr_window`` keeps every
point of that window reachable (per chain, the newest full at or before the window's start and every
delta after it), and any delta kept for another reason keeps the full and deltas it is replayed from.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from drtool.durations import Duration, format_duration

DEFAULT_MILESTONE_TAGS = ("milestone",)

# bucket rules, newest-first order of evaluation; each maps a time to the bucket it falls in
_BUCKETS: dict[str, Callable[[dt.datetime], str]] = {
    "hourly": lambda t: t.strftime("%Y-%m-%d %H:00"),
    "daily": lambda t: t.strftime("%Y-%m-%d"),
    "weekly": lambda t: "{}-W{:02d}".format(*t.isocalendar()[:2]),
    "monthly": lambda t: t.strftime("%Y-%m"),
    "yearly": lambda t: t.strftime("%Y"),
}


class RetentionPolicy(BaseModel):
    """A backup set's ``retention:`` block from the config file (unknown keys are errors: typos lose data)."""

    model_config = ConfigDict(extra="forbid")
    keep_last: int | None = Field(default=None, ge=0)
    keep_within: Duration | None = None
    keep_hourly: int | None = Field(default=None, ge=0)
    keep_daily: int | None = Field(default=None, ge=0)
    keep_weekly: int | None = Field(default=None, ge=0)
    keep_monthly: int | None = Field(default=None, ge=0)
    keep_yearly: int | None = Field(default=None, ge=0)
    keep_tags: list[str] = Field(default_factory=lambda: list(DEFAULT_MILESTONE_TAGS))
    pitr_window: Duration | None = None  # delta chains: every point this far back stays restorable

    def is_empty(self) -> bool:
        rules = ("last", *_BUCKETS)
        return (
            self.keep_within is None
            and self.pitr_window is None
            and all(getattr(self, f"keep_{r}") is None for r in rules)
        )


@dataclasses.dataclass(frozen=True)
class BackupRef:
    """What retention needs to know of a backup (from its manifest or the catalog)."""

    id: str
    time: dt.datetime  # when the backup finished (UTC)
    complete: bool = True
    tags: tuple[str, ...] = ()
    link: ChainPosition | None = None  # set for backups of a delta chain
    flag: str | None = None  # why its times are not believed (drtool/repo/times.py): it counts for nothing


@dataclasses.dataclass(frozen=True)
class ChainPosition:
    kind: str  # full | delta
    base: str
    seq: int
    last_time: dt.datetime  # when the source was at the link's last position

    @property
    def is_delta(self) -> bool:
        return self.kind == "delta"


@dataclasses.dataclass(frozen=True)
class Decision:
    backup: BackupRef
    keep: bool
    reasons: tuple[str, ...]


def decide(backups: Sequence[BackupRef], policy: RetentionPolicy, now: dt.datetime) -> list[Decision]:
    """Keep or forget each backup of one set, newest first, with every reason that applies."""
    ordered = sorted(backups, key=lambda b: (b.time, b.id), reverse=True)
    reasons: dict[str, list[str]] = {b.id: [] for b in ordered}
    if policy.is_empty():
        for b in ordered:
            reasons[b.id].append("no retention policy: everything is kept")
        return _decisions(ordered, reasons)
    complete = [b for b in ordered if b.complete and not b.flag and not (b.link and b.link.is_delta)]
    if complete:
        reasons[complete[0].id].append("newest complete backup of the set")
    for b in ordered:
        if b.flag:
            reasons[b.id].append(f"flagged, kept for review and counted by no rule: {b.flag}")
            continue
        milestones = sorted(set(b.tags) & set(policy.keep_tags))
        if milestones:
            reasons[b.id].append(f"tagged {', '.join(milestones)} (never pruned)")
        if policy.keep_within is not None and now - b.time <= policy.keep_within:
            reasons[b.id].append(f"within {format_duration(policy.keep_within)} of now")
    if policy.keep_last:
        for i, b in enumerate(complete[: policy.keep_last], 1):
            reasons[b.id].append(f"last #{i}")
    for rule, bucket_of in _BUCKETS.items():
        budget = getattr(policy, f"keep_{rule}") or 0
        seen: set[str] = set()
        for b in complete:
            if len(seen) == budget:
                break
            bucket = bucket_of(b.time)
            if bucket not in seen:  # newest first, so the first backup met in a bucket is its newest
                seen.add(bucket)
                reasons[b.id].append(f"{rule} #{len(seen)} ({bucket})")
    _chain_reasons(ordered, policy, now, reasons)
    return _decisions(ordered, reasons)


def _chain_reasons(
    ordered: list[BackupRef], policy: RetentionPolicy, now: dt.datetime, reasons: dict[str, list[str]]
) -> None:
    """Keep what restoring the newest point and every point of ``pitr_window`` replays, and what kept deltas need."""
    chains: dict[str, list[BackupRef]] = {}
    for b in ordered:
        if b.link is not None and not b.flag:
            chains.setdefault(b.link.base, []).append(b)
    if not chains:
        return
    for links in chains.values():
        # a folded full after the delta of its seq: that delta is what the fold replaces
        links.sort(key=lambda b: (b.link.seq, not b.link.is_delta))  # type: ignore[union-attr]
    newest = max(chains.values(), key=lambda links: links[-1].link.last_time)  # type: ignore[union-attr]
    _keep_from(newest, None, "reaches the newest recovery point", reasons)
    if policy.pitr_window is not None:
        start = now - policy.pitr_window
        window = f"PITR window {format_duration(policy.pitr_window)}"
        for links in chains.values():
            if links[-1].link.last_time >= start:  # type: ignore[union-attr]
                _keep_from(links, start, window, reasons)
    for links in chains.values():  # a delta kept by any rule keeps what it is replayed from
        for i, b in enumerate(links):
            if b.link.is_delta and reasons[b.id]:  # type: ignore[union-attr]
                _keep_base_of(links[: i + 1], b.id, reasons)


def _keep_from(links: list[BackupRef], start: dt.datetime | None, why: str, reasons: dict[str, list[str]]) -> None:
    """Keep the newest full of the chain at or before ``start`` (None: the newest full) and everything after it."""
    fulls = [i for i, b in enumerate(links) if not b.link.is_delta]  # type: ignore[union-attr]
    if not fulls:
        return
    usable = [i for i in fulls if start is None or links[i].link.last_time <= start]  # type: ignore[union-attr]
    first = usable[-1] if usable else fulls[0]
    for b in links[first:]:
        if why not in reasons[b.id]:
            reasons[b.id].append(why)


def _keep_base_of(links: list[BackupRef], delta_id: str, reasons: dict[str, list[str]]) -> None:
    fulls = [i for i, b in enumerate(links) if not b.link.is_delta]  # type: ignore[union-attr]
    if not fulls:
        return
    for b in links[fulls[-1] :]:
        if not reasons[b.id]:
            reasons[b.id].append(f"replayed to reach delta {delta_id}")


def _decisions(ordered: list[BackupRef], reasons: dict[str, list[str]]) -> list[Decision]:
    out = []
    for b in ordered:
        kept = reasons[b.id]
        if not kept:
            kept = ["no rule keeps it" if b.complete else "partial, and outside keep_within"]
        out.append(Decision(backup=b, keep=bool(reasons[b.id]), reasons=tuple(kept)))
    return out
