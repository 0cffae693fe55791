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

Links are judged by when the store received them (``Manifest.stored``), not only by what they state: a key
holder can write a link *now* with any stated position and time (docs/threat-model.md, "Chain links").
- A full is used for a point only if the store held it by then: a time T (within ``max_clock_skew``), or
  the time the store received revision R in the chain. A folded full written later (``drtool compact``, or
  a forgery: they look alike) serves the points after it was stored, and earlier ones replay the chain;
  ``trust_compacted`` (``--trust-compacted``) lifts that for folded fulls.
- A link that reuses a seq (the first the store received keeps it), a delta received after a later link of
  its chain, a fold that does not match the delta it folds, and a full claiming to start a chain it did not
  start are never used (``review_links``; `drtool check` names them).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from collections.abc import Iterable, Sequence

from drtool.errors import IntegrityError, NotFound
from drtool.points import LATEST, Point, parse_time
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.times import DEFAULT_MAX_SKEW

log = logging.getLogger(__name__)


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
    stored: dt.datetime | None  # when the store received its manifest (its own clock), None when unknown
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
            stored=manifest.stored,
            manifest=manifest,
        )

    @property
    def is_delta(self) -> bool:
        return self.kind == "delta"


@dataclasses.dataclass
class Chain:
    """A chain's fulls (its first full, seq 0, and folded fulls) and its deltas, both by seq: the links a
    restore may use. ``doubtful``: the chain's other links, by backup id, with why none is ever used."""

    base: str
    plugin: str
    backup_set: str | None
    fulls: list[Link]
    deltas: list[Link]
    doubtful: dict[str, str] = dataclasses.field(default_factory=dict)
    trust_compacted: bool = False

    @property
    def first_full(self) -> Link:
        return min(self.fulls, key=lambda f: f.seq)

    @property
    def tip(self) -> Link:
        """The newest point of the chain: its last delta, or its newest full when it has none after it."""
        links = [*self.fulls, *self.deltas]
        return max(links, key=lambda link: (link.seq, link.is_delta))

    def received(self, position: int) -> dt.datetime | None:
        """When the store received revision ``position`` of this chain: the store time of the first full or
        delta holding it (None when no link holds it, or the store gives no times)."""
        holder = next((link for link in (self.first_full, *self.deltas) if link.last >= position), None)
        return holder.stored if holder else None

    def usable(self, full: Link, point: Point, horizon: dt.datetime | None) -> bool:
        """Whether a restore of ``point`` may start from ``full``: it is at or before the point, and the store
        held it by ``horizon`` (when the store held the point), or it is a folded full and compactions are
        trusted (``--trust-compacted``)."""
        if not _at_or_before(full, point):
            return False
        if horizon is None or full.stored is None or full.stored <= horizon:
            return True
        return self.trust_compacted and full.seq > 0

    def reaches(self, point: Point, horizon: dt.datetime | None = None) -> bool:
        """Whether the chain starts at or before ``point`` (it may still end before it), as the store held it."""
        return self.usable(self.first_full, point, horizon)

    def plan(self, point: Point, horizon: dt.datetime | None = None) -> PointPlan:
        """The full to start from and the deltas to replay to reach ``point``; refuses gaps and overshoots.
        ``horizon``: when the store held the point (``point_horizon``); fulls it received later are passed over."""
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
        usable = [f for f in self.fulls if self.usable(f, point, horizon)]
        if not usable:
            raise NotFound(
                f"no full of chain {self.base} was in the store by {point.describe()}: its fulls were received later",
                "restore a later point, or pass --trust-compacted to start from a folded full (docs/threat-model.md)",
            )
        base = max(usable, key=lambda f: (f.seq, f.stored or _EPOCH))
        later = [f for f in self.fulls if f.seq > base.seq and _at_or_before(f, point)]
        deltas = []
        previous = base
        for delta in (d for d in self.deltas if d.seq > base.seq):
            if _reached(previous, point):
                break  # the full already holds the point: a hole after it does not matter
            check_continuity(previous, delta)
            deltas.append(delta)
            previous = delta
        return PointPlan(self, base, deltas, point, passed_over=later)


_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)


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
    passed_over: list[Link] = dataclasses.field(default_factory=list)  # folded fulls received after the point


def build_chains(
    links: Iterable[Link], max_skew: dt.timedelta = DEFAULT_MAX_SKEW, *, trust_compacted: bool = False
) -> list[Chain]:
    """Group links by chain, oldest chain first, each link judged (``review_chain``). A chain whose every
    full was pruned is dropped."""
    by_base: dict[tuple[str, str], list[Link]] = {}
    for link in links:
        by_base.setdefault((link.plugin, link.base), []).append(link)
    chains = []
    for (plugin, base), members in by_base.items():
        chain = review_chain(plugin, base, members, max_skew, trust_compacted)
        if chain.fulls:
            chains.append(chain)
    return sorted(chains, key=lambda c: (c.first_full.last_time, c.base))


def review_chain(
    plugin: str, base: str, links: Sequence[Link], max_skew: dt.timedelta, trust_compacted: bool = False
) -> Chain:
    """Sort one chain's links into those a restore may use and the doubtful ones, with why.

    What the store's clock says of a genuine chain: one follower writes each seq once, in seq order, so
    each delta is received before every later one; a fold (`drtool compact`) records the position and time
    of the delta it folds, and is received after it. A key holder writing now can state anything, but
    cannot receive a link in the past."""
    first_seen = sorted(links, key=lambda link: (link.stored or _EPOCH, link.backup_id))
    doubtful: dict[str, str] = {}
    held: dict[tuple[str, int], Link] = {}
    for link in first_seen:
        if not link.is_delta and link.seq == 0 and link.backup_id != base:
            doubtful[link.backup_id] = f"claims to start chain {base}, which backup {base} started"
            continue
        first = held.setdefault((link.kind, link.seq), link)
        if first is not link and (link.is_delta or not trust_compacted):
            doubtful[link.backup_id] = (
                f"reuses seq {link.seq} of chain {base}, which {first.backup_id} holds "
                f"(received {_when(first.stored)}, this one {_when(link.stored)})"
            )
    deltas = sorted((d for d in links if d.is_delta and d.backup_id not in doubtful), key=lambda d: d.seq)
    earliest_after: Link | None = None
    for delta in reversed(deltas):  # a delta received after a later delta of its chain was written later
        if _later(delta, earliest_after, max_skew):
            assert earliest_after is not None
            doubtful[delta.backup_id] = (
                f"delta seq {delta.seq} of chain {base} was received {_when(delta.stored)}, after delta seq "
                f"{earliest_after.seq} ({earliest_after.backup_id}, received {_when(earliest_after.stored)})"
            )
        elif earliest_after is None or _later(earliest_after, delta, dt.timedelta(0)):
            earliest_after = delta
    by_seq = {d.seq: d for d in deltas if d.backup_id not in doubtful}
    for full in (f for f in links if not f.is_delta and f.seq > 0 and f.backup_id not in doubtful):
        folded = by_seq.get(full.seq)
        if folded is not None and (
            (full.last, full.last_time) != (folded.last, folded.last_time) or _later(folded, full, max_skew)
        ):
            doubtful[full.backup_id] = (
                f"a folded full of chain {base} at seq {full.seq} that does not match the delta it folds "
                f"({folded.backup_id}: revision {folded.last}, {_at(folded.last_time)}, received "
                f"{_when(folded.stored)}; the fold says revision {full.last}, {_at(full.last_time)}, received "
                f"{_when(full.stored)})"
            )
    kept = [link for link in links if link.backup_id not in doubtful]
    fulls = sorted((f for f in kept if not f.is_delta), key=lambda f: (f.seq, f.stored or _EPOCH))
    chain_deltas = sorted((d for d in kept if d.is_delta), key=lambda d: d.seq)
    first = links[0]
    return Chain(base, plugin, first.backup_set, fulls, chain_deltas, doubtful, trust_compacted)


def _later(link: Link, other: Link | None, slack: dt.timedelta) -> bool:
    """Whether the store received ``link`` more than ``slack`` after ``other`` (False when a time is unknown)."""
    if other is None or link.stored is None or other.stored is None:
        return False
    return link.stored - other.stored > slack


def _at(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}Z"


def _when(moment: dt.datetime | None) -> str:
    return _at(moment) if moment else "at an unknown time"


def late_folds(chain: Chain, max_skew: dt.timedelta) -> dict[str, str]:
    """The folded fulls of ``chain`` received after the point they hold (every `drtool compact` writes
    one, and so can a key holder): a restore of a point before that uses them only with --trust-compacted."""
    out = {}
    for full in chain.fulls:
        if full.seq > 0 and full.stored is not None and full.stored - full.last_time > max_skew:
            out[full.backup_id] = (
                f"folded full of chain {chain.base} at seq {full.seq} (revision {full.last}, {_at(full.last_time)}) "
                f"was received {_at(full.stored)}: points before then replay the chain instead, unless "
                "--trust-compacted"
            )
    return out


def point_horizon(chains: Sequence[Chain], point: Point, max_skew: dt.timedelta) -> dt.datetime | None:
    """When the store held ``point``: a time plus the clock skew; for a revision, the earliest any chain
    received it (a chain written later that claims it too is not believed); None for ``latest``."""
    if point.time is not None:
        return point.time + max_skew
    if point.position is None:
        return None
    received = [t for c in chains if (t := c.received(point.position)) is not None]
    return min(received) + max_skew if received else None


def choose_chain(chains: Sequence[Chain], point: Point, horizon: dt.datetime | None = None) -> Chain:
    """The chain holding ``point``: the newest chain that starts at or before it.

    A point after one chain's tip and before the next chain's start is in a gap (the follower lost the
    watch, etcd compacted past it, a new chain began): refused, naming the revisions that are missing.
    """
    if not chains:
        raise NotFound("no delta chain in the store for this backup set", "run `drtool follow` first")
    if point.latest:
        return chains[-1]
    candidates = [c for c in chains if c.reaches(point, horizon)]
    if not candidates and any(c.reaches(point) for c in chains):
        raise NotFound(
            f"no full snapshot at or before {point.describe()} was in the store by then: the fulls that hold it "
            "were received later (folded by `drtool compact`, or forged), and the links before them are gone",
            "if you folded the chain yourself, pass --trust-compacted (docs/threat-model.md); or pick a later point",
        )
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


def plan_point(chains: Sequence[Chain], point: Point, max_skew: dt.timedelta = DEFAULT_MAX_SKEW) -> PointPlan:
    horizon = point_horizon(chains, point, max_skew)
    chain = choose_chain(chains, point, horizon)
    plan = chain.plan(point, horizon)
    for backup_id, why in chain.doubtful.items():
        log.warning("backup %s is not used: %s (`drtool check`; docs/threat-model.md)", backup_id, why)
    for fold in plan.passed_over:
        log.warning(
            "folded full %s is not used for %s: the store received it at %s, after that point "
            "(--trust-compacted uses it)",
            fold.backup_id,
            point.describe(),
            _when(fold.stored),
        )
    return plan


class ChainReader:
    """The store's chain links, read once and shared by every chain or point asked of it (thread-safe).

    Reading links means reading every manifest (only a manifest says whether its backup is a link), so a
    run that resolves several points (a plan with more than one ``at`` step) holds one reader, and each
    manifest is read at most once; those in ``known`` (already read by the caller) are not read again.
    """

    def __init__(self, repo: Repository, known: Sequence[Manifest] = (), *, trust_compacted: bool = False) -> None:
        self.repo = repo
        self.trust_compacted = trust_compacted
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
            return self._build(link for link in links if link.backup_set == newest.backup_set)
        backup_id = ref.id if isinstance(ref, Manifest) else self.repo.resolve(ref)
        mine = next((link for link in links if link.backup_id == backup_id), None)
        if mine is None:
            raise NotFound(
                f"backup {backup_id} is not part of a delta chain of plugin {plugin}",
                "--at needs a chain written by `drtool follow`; restore `latest` with --at",
            )
        return self._build(link for link in links if link.base == mine.base)

    def _build(self, links: Iterable[Link]) -> list[Chain]:
        return build_chains(links, self.repo.max_skew, trust_compacted=self.trust_compacted)

    def find_point(self, plugin: str, ref: str | Manifest, at: str | int) -> PointPlan:
        """The full and the deltas that reach point ``at`` (``Point.parse``) of the chain ``ref`` names."""
        point = Point.parse(at)  # a bad point is refused before any manifest is read
        return plan_point(self.chains(plugin, ref), point, self.repo.max_skew)


def read_links(repo: Repository, plugin: str) -> list[Link]:
    """Every chain link of ``plugin`` in the store (every manifest is read, in parallel)."""
    return ChainReader(repo).links(plugin)


def find_point(
    repo: Repository, plugin: str, ref: str | Manifest, at: str | int, *, trust_compacted: bool = False
) -> PointPlan:
    """``ChainReader.find_point`` for one point (a ``ref`` given as a manifest is not read again)."""
    known = [ref] if isinstance(ref, Manifest) else []
    return ChainReader(repo, known, trust_compacted=trust_compacted).find_point(plugin, ref, at)


def review_links(links: Iterable[Link], max_skew: dt.timedelta) -> tuple[dict[str, str], dict[str, str]]:
    """For `drtool check`: the doubtful links of every chain (never used), and the folded fulls received
    after the point they hold (used for later points only), each by backup id with why."""
    doubtful: dict[str, str] = {}
    folds: dict[str, str] = {}
    for chain in build_chains(links, max_skew):
        doubtful.update(chain.doubtful)
        folds.update(late_folds(chain, max_skew))
    return doubtful, folds
