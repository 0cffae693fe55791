"""The helm plugin: Helm 3 releases (their storage Secrets, every revision) and the charts they came from.

Source settings: ``kubeconfig``/``context`` (release Secrets; ``releases`` defaults to true when a kubeconfig
is given), ``namespaces`` (default all), ``repositories`` (classic ``index.yaml`` repositories: URLs or
``{url, charts}``), ``all_versions`` (false: only chart versions releases use, plus the newest of named
charts), ``oci_charts`` (``oci://host/repo/chart:version``), ``plain_http``.
Target settings: ``kubeconfig``/``context``, ``registry``/``registry_map``/``plain_http`` (where charts are
pushed), ``chart_prefix`` (``charts``). docs/helm.md explains each.
"""

from __future__ import annotations

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["HelmPlugin"]


class HelmPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for Helm 3 (Secret storage driver, OCI and classic charts)."""

    name = "helm"
    description = "Helm releases (storage Secrets, every revision) and their charts (classic repos, OCI), restored"
    schema = SCHEMA
    discover = staticmethod(_backup.discover_inventory)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_restore.dependencies)
