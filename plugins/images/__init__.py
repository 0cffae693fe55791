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

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import restore as _restore
from .schema import SCHEMA

__all__ = ["ImagesPlugin"]


class ImagesPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for OCI registries (distribution API v2 / OCI 1.1)."""

    name = "images"
    description = "container images and OCI artifacts by digest (every platform, referrers), pushed to a new registry"
    schema = SCHEMA
    discover = staticmethod(_backup.discover_inventory)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_restore.run_verify)
    dependencies = staticmethod(_restore.dependencies)
