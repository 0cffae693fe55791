"""Restoring one plugin's artifacts of a backup into a target, then verifying the target.

The backup comes as its ``Manifest``, resolved and decrypted once by the caller (`drtool restore`, a plan's
executor, the independence analysis) and passed by value from there. A point-in-time restore of a delta
chain comes as a ``PointPlan`` (``drtool.repo.chains.find_point``): the full to start from and the deltas
to replay, their manifests read once when the chain was resolved.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from drtool.errors import NotFound, SourceError
from drtool.plugin.contract import FAILED, PASSED, Check, Dependency, Plugin, RestoreResult, verification
from drtool.progress import Progress
from drtool.repo.chains import PointPlan
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RestoreOutcome:
    backup_id: str
    plugin: str
    result: RestoreResult
    checks: list[Check]
    verification_ran: bool = True

    @property
    def failed(self) -> bool:
        """A check ran and failed; a skipped verification, or one with nothing to check, fails nothing."""
        return self.verification == FAILED

    @property
    def verified(self) -> bool:
        """At least one check ran and all passed: an `all()` over no checks is not a verification."""
        return self.verification == PASSED

    @property
    def verification(self) -> str:
        """What the report says of the checks: skipped, none (nothing to check), passed or failed."""
        return verification(self.checks, self.verification_ran)


def restore_dependencies(
    repo: Repository, plugin: Plugin, manifest: Manifest, target: Mapping[str, Any]
) -> list[Dependency]:
    """Everything a restore needs: the store and the key slot that opened it, then the plugin's own."""
    ctx = PluginRestoreContext(repo, manifest, plugin.name)
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
    repo: Repository, plan: PointPlan, plugin: str, progress: Progress | None = None
) -> PluginRestoreContext:
    """The context a plugin replays ``plan`` from: its full's, with ``deltas`` and ``point`` set."""
    deltas = [d.manifest for d in plan.deltas]
    log.debug("restore: point %s from %s + %d delta(s)", plan.point.describe(), plan.base.backup_id, len(deltas))
    return PluginRestoreContext(repo, plan.base.manifest, plugin, progress, deltas=deltas, point=plan.point)


def run_restore(
    repo: Repository,
    backup: Manifest | PointPlan,
    plugin: Plugin,
    target: Mapping[str, Any],
    *,
    options: Mapping[str, Any] | None = None,
    verify: bool = True,
    progress: Progress | None = None,
) -> RestoreOutcome:
    """Restore ``plugin``'s artifacts of ``backup`` into ``target``, then verify it. ``backup`` is the
    ``Manifest`` of the backup, or a ``PointPlan`` for the state at a point of a delta chain
    (docs/store-format.md, "Delta chains"): the plugin then replays the plan's deltas onto its full."""
    if isinstance(backup, PointPlan):
        ctx = point_context(repo, backup, plugin.name, progress)
    else:
        ctx = PluginRestoreContext(repo, backup, plugin.name, progress=progress)
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
    return RestoreOutcome(ctx.backup_id, plugin.name, result, checks, verification_ran=verify)
