"""Where a git restore pushes, for the independence analysis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import Dependency, RestoreContext

from .restore import repos_of
from .settings import RestoreTarget


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    """The remote a restore pushes into (or the local path it creates); the restore needs nothing else."""
    spec = RestoreTarget.parse(target, {})
    repos = repos_of(ctx, spec.only)
    several = len(repos_of(ctx)) > 1
    kind = "endpoint" if spec.url else "reference"
    purpose = "git remote the restore pushes into" if spec.url else "bare repository the restore creates"
    return [
        Dependency(kind, spec.where(name, several), purpose, f"backed up from {meta['url']}")
        for name, meta in repos.items()
    ]
