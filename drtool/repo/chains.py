"""Delta chains: a full backup followed by small delta backups, and how to reach a point inside one.

A plugin that follows a live log (etcd's watch stream) writes a full backup that starts a *chain*, then
delta backups that each hold the log between two positions (docs/store-format.md, "Delta chains"). Every
link is an ordinary backup with its manifest written last, so a delta exists only once it is complete.
A *folded* full (``drtool compact``) is a full snapshot of the chain at one of its deltas: a restore may
start there instead of at the chain's first full and replay fewer deltas.

This module is the core's part, independent of what positions mean: grouping manifests into chains,
finding the base and the deltas for a point, and refusing a point the chain cannot reach, naming the
missing range. Replaying the deltas is the plugin's job. Each link keeps the manifest it was read from, so
a point-in-time restore reads every manifest once and passes the chosen ones on by value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Iterable, Sequence

from drtool.errors import IntegrityError, NotFound
from drtool.points import LATEST, Point, parse_time
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository


class ChainGap(IntegrityError):
    """The deltas of a chain do not connect: a point behind the gap cannot be restored exactly."""


@dataclasses.dataclass(frozen=True)
class Link:
    """One backup of a chain, as the core sees it (read from its manifest)."""

    backup_id: str
    kind: str  # full | delta
    plugin: str
    backup_set: str | None
    base: str
    seq: int
    first: int | None
    last: int
    first_time: dt.datetime | None
    last_time: dt.datetime
    manifest: Manifest = dataclasses.field(compare=False, repr=False)

    @classmethod
    def of(cls, manifest: Manifest) -> Link | None:
        chain = manifest.chain
        if chain is None:
            return None
        return cls(
            backup_id=manifest.id,
            kind=manifest.kind,
            plugin=chain.plugin,
            backup_set=manifest.backup_set,
            base=chain.base,
            seq=chain.seq,
            first=chain.first,
            last=chain.last,
            first_time=parse_time(chain.first_time) if chain.first_time else None,
            last_time=parse_time(chain.last_time),
            manifest=manifest,
        )

    @property
    def is_delta(self) -> bool:
        return self.kind == "delta"


@dataclasses.dataclass
class Chain:
    """A chain's fulls (its first full, seq 0, and folded fulls) and its deltas, both by seq."""

    base: str
    plugin: str
    backup_set: str | None
    fulls: list[Link]
    deltas: list[Link]

    @property
    def first_full(self) -> Link:
        return min(self.fulls, key=lambda f: f.seq)

    @property
    def tip(self) -> Link:
        """The newest point of the chain: its last delta, or its newest full when it has none after it."""
        links = [*self.fulls, *self.deltas]
        return max(links, key=lambda link: (link.seq, link.is_delta))

    def reaches(self, point: Point) -> bool:
        """Whether the chain starts at or before ``point`` (it may still end before it)."""
        first = self.first_full
        if point.position is not None:
            return first.last <= point.position
        return point.time is None or first.last_time <= point.time

    def plan(self, point: Point) -> PointPlan:
        """The full to start from and the deltas to replay to reach ``point``; refuses gaps and overshoots."""
        tip = self.tip
        if point.position is not None and point.position > tip.last:
            raise NotFound(
                f"revision {point.position} is past the newest delta of chain {self.base} "
                f"(it ends at {tip.last}, {tip.last_time:%Y-%m-%dT%H:%M:%SZ})",
                "use --at latest, or an earlier point",
            )
        if point.time is not None and point.time > tip.last_time:
            raise NotFound(
                f"no delta reaches {point.describe()}: the newest recovery point of chain {self.base} is "
                f"{tip.last_time:%Y-%m-%dT%H:%M:%SZ} (revision {tip.last})",
                "use --at latest to restore that point, or an earlier time",
            )
        usable = [f for f in self.fulls if _at_or_before(f, point)]
        base = max(usable, key=lambda f: f.seq)
        deltas = []
        previous = base
        for delta in (d for d in self.deltas if d.seq > base.seq):
            check_continuity(previous, delta)
            deltas.append(delta)
            previous = delta
            if _reached(delta, point):
                break
        return PointPlan(self, base, deltas, point)


def _at_or_before(full: Link, point: Point) -> bool:
    if point.position is not None:
        return full.last <= point.position
    return point.time is None or full.last_time <= point.time


def _reached(delta: Link, point: Point) -> bool:
    if point.position is not None:
        return delta.last >= point.position
    return point.time is not None and delta.last_time >= point.time


def check_continuity(previous: Link, delta: Link) -> None:
    """``delta`` must follow ``previous`` in seq, and its positions must start at or before the next one.

    An overlap is allowed (a full snapshot's position may be a lower bound: the replay skips what the
    snapshot already holds); a hole is not.
    """
    if delta.seq != previous.seq + 1:
        raise ChainGap(
            f"delta chain {delta.base} is missing link(s) {previous.seq + 1}..{delta.seq - 1}: "
            f"revisions {previous.last + 1}..{(delta.first or previous.last + 1) - 1} are not in the store",
            "restore a point before the gap (--at), or a full backup",
        )
    if delta.first is not None and delta.first > previous.last + 1:
        raise ChainGap(
            f"delta chain {delta.base} has a gap: revisions {previous.last + 1}..{delta.first - 1} are missing "
            f"between {previous.backup_id} and {delta.backup_id}",
            "restore a point before the gap (--at), or a full backup",
        )


@dataclasses.dataclass
class PointPlan:
    """What restores a point: the full to start from and the deltas to replay after it, manifests in hand."""

    chain: Chain
    base: Link
    deltas: list[Link]
    point: Point


def build_chains(links: Iterable[Link]) -> list[Chain]:
    """Group links by chain, oldest chain first. A chain whose every full was pruned is dropped."""
    by_base: dict[str, Chain] = {}
    for link in links:
        chain = by_base.setdefault(link.base, Chain(link.base, link.plugin, link.backup_set, [], []))
        (chain.deltas if link.is_delta else chain.fulls).append(link)
    chains = []
    for chain in by_base.values():
        if not chain.fulls:
            continue
        chain.fulls.sort(key=lambda f: f.seq)
        chain.deltas.sort(key=lambda d: d.seq)
        chains.append(chain)
    return sorted(chains, key=lambda c: (c.first_full.last_time, c.base))


def choose_chain(chains: Sequence[Chain], point: Point) -> Chain:
    """The chain holding ``point``: the newest chain that starts at or before it.

    A point after one chain's tip and before the next chain's start is in a gap (the follower lost the
    watch, etcd compacted past it, a new chain began): refused, naming the revisions that are missing.
    """
    if not chains:
        raise NotFound("no delta chain in the store for this backup set", "run `drtool follow` first")
    if point.latest:
        return chains[-1]
    candidates = [c for c in chains if c.reaches(point)]
    if not candidates:
        first = chains[0].first_full
        raise NotFound(
            f"{point.describe()} is before the oldest full snapshot of the chains "
            f"(revision {first.last}, {first.last_time:%Y-%m-%dT%H:%M:%SZ})",
            "pick a later point; older states were pruned or never backed up",
        )
    chain = candidates[-1]
    later = chains[chains.index(chain) + 1 :]
    tip = chain.tip
    beyond = tip.last < point.position if point.position is not None else tip.last_time < point.time  # type: ignore[operator]
    if beyond and later:
        nxt = later[0].first_full
        raise ChainGap(
            f"{point.describe()} falls in a gap between delta chains: revisions {tip.last + 1}..{nxt.last - 1} "
            f"are not in the store (chain {chain.base} ends at {tip.last}, the next full snapshot "
            f"{nxt.backup_id} is at revision {nxt.last})",
            f"restore revision {tip.last} or {nxt.last} instead",
        )
    return chain


def plan_point(chains: Sequence[Chain], point: Point) -> PointPlan:
    return choose_chain(chains, point).plan(point)


class ChainReader:
    """The store's chain links, read once and shared by every chain or point asked of it (thread-safe).

    Reading links means reading every manifest (only a manifest says whether its backup is a link), so a
    run that resolves several points (a plan with more than one ``at`` step) holds one reader, and each
    manifest is read at most once; those in ``known`` (already read by the caller) are not read again.
    """

    def __init__(self, repo: Repository, known: Sequence[Manifest] = ()) -> None:
        self.repo = repo
        self._known = {m.id: m for m in known}
        self._links: list[Link] | None = None
        self._lock = threading.Lock()

    def links(self, plugin: str) -> list[Link]:
        """Every chain link of ``plugin`` in the store."""
        with self._lock:
            if self._links is None:
                ids = [i for i in self.repo.backup_ids() if i not in self._known]
                read = self.repo.manifests_newest_first(ids)
                # a flagged manifest (its times disagree with the store's clock) never joins a chain
                found = (Link.of(m) for m in (*self._known.values(), *read) if m.trusted)
                self._links = [link for link in found if link is not None]
        return [link for link in self._links if link.plugin == plugin]

    def chains(self, plugin: str, ref: str | Manifest) -> list[Chain]:
        """The chains a point-in-time restore chooses from.

        ``latest``: the chains of the backup set that holds the newest link of ``plugin`` (the follower that
        ran last). A backup id or its manifest: only that backup's chain (the backup must be one of its links).
        """
        links = self.links(plugin)
        if isinstance(ref, str) and ref == LATEST:
            if not links:
                url = self.repo.backend.url
                raise NotFound(f"store {url} holds no delta chain of plugin {plugin}", "run `drtool follow`")
            newest = max(links, key=lambda link: (link.last_time, link.seq))
            return build_chains(link for link in links if link.backup_set == newest.backup_set)
        backup_id = ref.id if isinstance(ref, Manifest) else self.repo.resolve(ref)
        mine = next((link for link in links if link.backup_id == backup_id), None)
        if mine is None:
            raise NotFound(
                f"backup {backup_id} is not part of a delta chain of plugin {plugin}",
                "--at needs a chain written by `drtool follow`; restore `latest` with --at",
            )
        return build_chains(link for link in links if link.base == mine.base)

    def find_point(self, plugin: str, ref: str | Manifest, at: str | int) -> PointPlan:
        """The full and the deltas that reach point ``at`` (``Point.parse``) of the chain ``ref`` names."""
        point = Point.parse(at)  # a bad point is refused before any manifest is read
        return plan_point(self.chains(plugin, ref), point)


def read_links(repo: Repository, plugin: str) -> list[Link]:
    """Every chain link of ``plugin`` in the store (every manifest is read, in parallel)."""
    return ChainReader(repo).links(plugin)


def find_point(repo: Repository, plugin: str, ref: str | Manifest, at: str | int) -> PointPlan:
    """``ChainReader.find_point`` for one point (a ``ref`` given as a manifest is not read again)."""
    return ChainReader(repo, [ref] if isinstance(ref, Manifest) else []).find_point(plugin, ref, at)
