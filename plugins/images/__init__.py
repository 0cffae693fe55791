"""The images plugin: container images and OCI artifacts copied by digest, whole indexes and referrers.

Source settings: ``images`` (explicit references), ``kubeconfig``/``context`` (scan the cluster's workloads
for image references; ``scan_workloads``), ``registries`` (host globs to copy from), ``referrers`` (true),
``plain_http`` (default: loopback hosts only), ``workers`` (4), ``credentials`` (host -> user and the name
of an environment variable holding the password).
Target settings: ``registry`` (target host for every image), ``registry_map`` (``src-host=dst-host,...``),
``plain_http``, ``workers``, ``credentials``, ``dry_run``. docs/images.md explains each; the kubernetes
plugin's ``image_registry_map`` points restored workloads at the target registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult

from . import backup as _backup
from . import restore as _restore
from .lab import ImagesLab

__all__ = ["ImagesPlugin"]


class ImagesPlugin:
    """Implements ``drtool.plugin.contract.Plugin`` for OCI registries (distribution API v2 / OCI 1.1)."""

    name = "images"
    description = "container images and OCI artifacts by digest (every platform, referrers), pushed to a new registry"
    lab = ImagesLab()

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover_inventory(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _restore.run_verify(ctx, target, options)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        return _restore.dependencies(ctx, target)
