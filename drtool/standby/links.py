"""Which chain links of a backup set a standby has yet to apply, and whether each one authenticates.

A standby applies only what the store vouches for: a manifest that does not open under the store's key, one
whose times the store's clock contradicts (``Manifest.trusted``), a link ``review_chain`` doubts, and a link
whose artifacts do not all read back authentic (every chunk's AEAD tag and each artifact's whole-stream
SHA-256) are skipped and reported, never applied. Artifacts are read in full *before* the link is applied
(stage, then commit), so a damaged chunk at the end of a link cannot leave half of it applied.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence

from drtool.errors import IntegrityError, NotFound
from drtool.repo.chains import Chain, Link, build_chains
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext

_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a standby stands in one plugin's chains: the last link it applied (or skipped past)."""

    base: str
    seq: int
    backup_id: str
    stored: str | None  # store time of that link (ISO 8601), what lag is measured from
    last_time: str  # the source time the link reaches


@dataclasses.dataclass(frozen=True)
class Skip:
    """A link (or a manifest) the standby passed over, and why."""

    name: str
    reason: str


@dataclasses.dataclass
class Pending:
    """What a poll found: links to apply in order, what it skipped, and the newest link's store time."""

    links: list[Link]
    skipped: list[Skip]
    newest_stored: dt.datetime | None


class LinkWatcher:
    """The set's chain links as the store holds them, read incrementally: each manifest is read once."""

    def __init__(self, repo: Repository, backup_set: str, plugins: Sequence[str]) -> None:
        self.repo = repo
        self.backup_set = backup_set
        self.plugins = list(plugins)
        self.links: dict[str, Link] = {}
        self._seen: set[str] = set()
        self._reported: set[str] = set()

    def poll(self, positions: Mapping[str, Position], fenced_after: dt.datetime | None = None) -> Pending:
        """Read new manifests and return the links after ``positions``, oldest first by store time.

        ``fenced_after``: links the store received after a fence are the fenced primary's and are skipped."""
        skipped = self._read_new()
        by_plugin: dict[str, list[Link]] = {}
        for link in self.links.values():
            if fenced_after is not None and link.stored is not None and link.stored > fenced_after:
                skipped += self._once(link.backup_id, "written after the set was fenced (the old primary's)")
                continue
            by_plugin.setdefault(link.plugin, []).append(link)
        todo: list[Link] = []
        newest: dt.datetime | None = None
        for plugin in self.plugins:
            chains = build_chains(by_plugin.get(plugin, ()), self.repo.max_skew)
            for chain in chains:
                skipped += [self._once(i, why)[0] for i, why in chain.doubtful.items() if i not in self._reported]
                newest = max([newest or _EPOCH, *(link.stored or _EPOCH for link in (*chain.fulls, *chain.deltas))])
            todo += next_links(chains, positions.get(plugin))
        todo.sort(key=lambda link: (link.stored or _EPOCH, link.seq))
        return Pending(todo, skipped, newest if newest and newest > _EPOCH else None)

    def _read_new(self) -> list[Skip]:
        new = [i for i in self.repo.backup_ids() if i not in self._seen]
        if not new:
            return []
        read = list(self.repo.manifests_newest_first(new))
        self._seen.update(new)
        invalidate = getattr(self.repo.chunks, "invalidate", None)  # a packed store's index, read once
        if invalidate is not None:
            invalidate()  # the new links' chunks are in index objects the follower wrote after it was read
        opened = {m.id for m in read}
        skipped = [
            self._once(
                i, f"its manifest does not authenticate: {self.repo.skipped.get(_manifest_name(i), 'unreadable')}"
            )[0]
            for i in new
            if i not in opened
        ]
        for manifest in read:
            link = Link.of(manifest)
            if link is None or manifest.backup_set != self.backup_set or link.plugin not in self.plugins:
                continue
            if not manifest.trusted:
                skipped += self._once(manifest.id, f"the store's clock contradicts its times ({manifest.flag})")
                continue
            self.links[manifest.id] = link
        return skipped

    def _once(self, name: str, reason: str) -> list[Skip]:
        if name in self._reported:
            return []
        self._reported.add(name)
        return [Skip(name, reason)]


def next_links(chains: Sequence[Chain], position: Position | None) -> list[Link]:
    """The links to apply after ``position``: the rest of its chain, or, when the standby has no position
    or a newer chain began (the follower restarted), the newest chain's newest full and the deltas after it.

    A missing seq (a manifest that did not authenticate) is stepped over: the skip was reported, and each
    later delta carries whole objects, so the standby converges again with the next change or full."""
    if not chains:
        return []
    newest = max(chains, key=lambda c: (c.first_full.last_time, c.first_full.stored or _EPOCH))  # ties: store order
    current = next((c for c in chains if position is not None and c.base == position.base), None)
    if current is not newest:
        full = max(newest.fulls, key=lambda f: (f.seq, f.stored or _EPOCH))
        return [full, *(d for d in newest.deltas if d.seq > full.seq)]
    assert position is not None
    return [d for d in current.deltas if d.seq > position.seq]


def authenticate(repo: Repository, manifest: Manifest, plugin: str) -> str | None:
    """Read every artifact of ``plugin`` in the link through verified streams; None when all authenticate,
    else why not (nothing of the link may be applied then)."""
    ctx = PluginRestoreContext(repo, manifest, plugin)
    try:
        ctx.preflight()
        for artifact in ctx.artifacts:
            with ctx.open(artifact.name) as stream:
                for _ in stream:
                    pass
    except (IntegrityError, NotFound) as exc:
        return exc.message
    return None


def _manifest_name(backup_id: str) -> str:
    return f"manifests/{backup_id}"


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(stamp: str | None) -> dt.datetime | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
