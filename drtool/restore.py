"""Restoring one plugin's artifacts of a backup into a target, then verifying the target."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from drtool.errors import NotFound, SourceError
from drtool.plugin.contract import Check, Dependency, Plugin, Point, RestoreResult
from drtool.progress import Progress
from drtool.repo.chains import PointPlan, chains_for, plan_point
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RestoreOutcome:
    backup_id: str
    plugin: str
    result: RestoreResult
    checks: list[Check]

    @property
    def verified(self) -> bool:
        return all(c.ok for c in self.checks)


def restore_dependencies(
    repo: Repository, plugin: Plugin, backup_ref: str, target: Mapping[str, Any]
) -> list[Dependency]:
    """Everything a restore needs: the store and the key slot that opened it, then the plugin's own."""
    ctx = repo.restore_context(backup_ref, plugin.name)
    backend = repo.backend
    core = [
        Dependency(
            "endpoint",
            backend.endpoint() or backend.url,
            "drtool store the artifacts are read from",
            f"store {backend.url}",
        )
    ]
    slot = repo.unlocked_with
    if slot is not None:
        core.append(
            Dependency(
                "credential",
                f"key slot {slot.id} ({slot.kind})",
                "unlocks the store's master key",
                f"slot label {slot.label!r}",
            )
        )
    return core + list(plugin.dependencies(ctx, target))


def point_context(
    repo: Repository, backup_ref: str, plugin: Plugin, at: str | int, progress: Progress | None = None
) -> PluginRestoreContext:
    """The context of a point-in-time restore (``--at``): the chain's full to start from, with the deltas
    to replay up to the point (refused, naming the missing revisions, when the chain has a gap)."""
    return plan_context(repo, plan_point(chains_for(repo, plugin.name, backup_ref), Point.parse(at)), plugin, progress)


def plan_context(
    repo: Repository, plan: PointPlan, plugin: Plugin, progress: Progress | None = None
) -> PluginRestoreContext:
    ctx = repo.restore_context(plan.base.backup_id, plugin.name, progress=progress)
    ctx.deltas = [repo.restore_context(d.backup_id, plugin.name, progress=progress) for d in plan.deltas]
    ctx.point = plan.point
    log.debug("restore: point %s from %s + %d delta(s)", plan.point.describe(), ctx.backup_id, len(ctx.deltas))
    return ctx


def run_restore(
    repo: Repository,
    backup_ref: str,
    plugin: Plugin,
    target: Mapping[str, Any],
    *,
    options: Mapping[str, Any] | None = None,
    verify: bool = True,
    progress: Progress | None = None,
) -> RestoreOutcome:
    """Restore ``plugin``'s artifacts of a backup; with ``options["at"]`` (a revision, a time or ``latest``),
    the state at that point of a delta chain (docs/store-format.md, "Delta chains")."""
    at = (options or {}).get("at")
    if at is not None:
        ctx = point_context(repo, backup_ref, plugin, at, progress)
    else:
        ctx = repo.restore_context(backup_ref, plugin.name, progress=progress)
    if not ctx.artifacts:
        outcome = ctx.outcome
        if outcome is not None and outcome.status == "failed":
            raise SourceError(
                f"plugin {plugin.name} failed in backup {ctx.backup_id}: {outcome.error}",
                "restore an earlier backup where it succeeded",
            )
        raise NotFound(
            f"backup {ctx.backup_id} holds nothing from plugin {plugin.name}",
            f"`drtool show {ctx.backup_id}` lists what it holds",
        )
    log.debug("restore: backup %s, plugin %s, %d artifact(s)", ctx.backup_id, plugin.name, len(ctx.artifacts))
    ctx.preflight()
    result = plugin.restore(ctx, target, options or {})
    log.debug("restore: plugin %s restored (changed=%s); verifying=%s", plugin.name, result.changed, verify)
    checks = plugin.verify(ctx, target, options or {}) if verify else []
    log.debug("restore: %d check(s), %d failed", len(checks), sum(not c.ok for c in checks))
    return RestoreOutcome(ctx.backup_id, plugin.name, result, checks)
