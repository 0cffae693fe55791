"""Restoring one plugin's artifacts of a backup into a target, then verifying the target.

The backup comes as its ``Manifest``, resolved and decrypted once by the caller (`drtool restore`, a plan's
executor, the independence analysis) and passed by value from there.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from drtool.errors import NotFound, SourceError
from drtool.plugin.contract import Check, Dependency, Plugin, RestoreResult
from drtool.progress import Progress
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

    @property
    def verified(self) -> bool:
        return all(c.ok for c in self.checks)


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


def run_restore(
    repo: Repository,
    manifest: Manifest,
    plugin: Plugin,
    target: Mapping[str, Any],
    *,
    options: Mapping[str, Any] | None = None,
    verify: bool = True,
    progress: Progress | None = None,
) -> RestoreOutcome:
    ctx = PluginRestoreContext(repo, manifest, plugin.name, progress=progress)
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
