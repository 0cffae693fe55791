"""The git plugin: platform declaration (GitOps) repositories, every branch and tag, as verified git bundles.

Source settings: ``repos`` (URLs, or ``{name, url}`` mappings) or ``url`` (one repository); ``lfs``
(``fail``, the default, refuses a repository that uses Git LFS, whose objects are not backed up yet;
``skip`` backs up its history anyway). Credentials come from git itself (credential helper, SSH agent),
never from drtool's settings.

Restore target: ``url`` (push into an existing, empty remote) or ``path`` (create a bare repository);
with several repositories either holds ``{name}``; ``repos`` restricts to some. Option ``force`` lets a
push overwrite diverged branches; ``dry_run`` writes nothing. docs/git.md explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult

from . import backup as _backup
from . import restore as _restore
from . import verify as _verify
from .lab import GitLab
from .settings import RestoreTarget

__all__ = ["GitPlugin"]


class GitPlugin:
    """Implements ``drtool.plugin.contract.Plugin`` (and ``LabSupport`` as ``lab``) for git repositories."""

    name = "git"
    description = "git repositories (GitOps declarations): every branch and tag as a verified bundle"
    lab = GitLab()

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _verify.run_verify(ctx, target, options)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        """The remote a restore pushes into (or the local path it creates); the restore needs nothing else."""
        spec = RestoreTarget.parse(target, {})
        repos = _restore.repos_of(ctx, spec.only)
        several = len(_restore.repos_of(ctx)) > 1
        kind = "endpoint" if spec.url else "reference"
        purpose = "git remote the restore pushes into" if spec.url else "bare repository the restore creates"
        return [
            Dependency(kind, spec.where(name, several), purpose, f"backed up from {meta['url']}")
            for name, meta in repos.items()
        ]
