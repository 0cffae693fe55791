"""`drtool compact`: fold a delta chain's deltas into a new full backup, offline.

A point-in-time restore replays every delta after the newest full of its chain, so the replay grows with
the time since that full. Folding writes a full equal to the chain's tip (the plugin restores the last
full into a throwaway member, replays the deltas, and snapshots it: the source is never touched), recorded
as a full of the same chain at the tip's seq (docs/store-format.md, "Delta chains"). Later restores start
there; retention may then forget the deltas before it once the PITR window no longer needs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.follow import commit_link
from drtool.plugin.contract import FollowSupport, Plugin
from drtool.points import Point
from drtool.progress import Progress
from drtool.repo.chains import ChainReader
from drtool.repo.manifest import ChainLink, Manifest, utc_now
from drtool.repo.repository import Repository
from drtool.repo.writer import DEFAULT_LOCK_WAIT, BackupSession
from drtool.restore import point_context


@dataclasses.dataclass
class CompactResult:
    manifest: Manifest | None  # the folded full, or None when there was nothing to fold
    base: str  # the full the fold started from
    deltas: int  # deltas folded
    reason: str = ""


def compact(
    repo: Repository,
    plugin: Plugin,
    *,
    ref: str = "latest",
    min_deltas: int = 1,
    options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    lock_wait: float = DEFAULT_LOCK_WAIT,
) -> CompactResult:
    """Fold the deltas after the newest full of the chain ``ref`` names (``latest``: the newest chain)."""
    if not isinstance(plugin, FollowSupport):
        raise UsageError(f"plugin {plugin.name} cannot fold deltas", "`drtool compact` needs a plugin with `fold`")
    chain = ChainReader(repo).chains(plugin.name, ref)[-1]
    plan = chain.plan(Point())
    if len(plan.deltas) < max(1, min_deltas):
        why = f"{len(plan.deltas)} delta(s) after full {plan.base.backup_id}, fewer than {max(1, min_deltas)}"
        return CompactResult(None, plan.base.backup_id, len(plan.deltas), why)
    ctx = point_context(repo, plan, plugin.name, progress)
    ctx.preflight()
    tip = plan.deltas[-1]
    with BackupSession(repo, backup_set=chain.backup_set, lock_wait=lock_wait, progress=progress) as session:
        started = utc_now()
        meta = dict(plugin.fold(ctx, session.context_for(plugin.name), options or {}))
        at = f"{tip.last_time:%Y-%m-%dT%H:%M:%S.%fZ}"
        link = ChainLink(plugin=plugin.name, base=chain.base, seq=tip.seq, last=tip.last, last_time=at)
        manifest = commit_link(session, plugin.name, started, meta, "full", link)
    return CompactResult(manifest, plan.base.backup_id, len(plan.deltas))
