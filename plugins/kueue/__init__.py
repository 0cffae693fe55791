"""The kueue plugin: Kueue's quotas and policies as one unit, rebuilt in Kueue's dependency order.

Backs up configuration only — Topologies, ResourceFlavors, WorkloadPriorityClasses, MultiKueueClusters
(with the kubeconfig Secrets they name), MultiKueueConfigs, ProvisioningRequestConfigs, AdmissionChecks,
Cohorts, ClusterQueues, LocalQueues — never Workloads or status, which are Kueue's runtime state. Like the
kubernetes plugin it is built on the toolkit's Kubernetes machinery (drtool/kube): same
client, discovery, artifact format and server-side apply.

Source settings: ``kubeconfig``, ``context``, ``kueue_namespace`` (kueue-system), ``page_size``.
Target settings: ``kubeconfig``, ``context``. Restore options: ``allow_missing`` (false, true or a list of
reference kinds), ``install_crds`` (true), ``existing`` (update|skip|fail), ``dry_run``, ``workers``,
``crd_timeout``. ``diff`` compares a backup's quotas with a live cluster. docs/kueue.md explains each.
"""

from __future__ import annotations

from collections.abc import Sequence

from drtool.kube import pointview as _pointview
from drtool.kube import standby as _standby
from drtool.plugin.checks import PlatformCheck
from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import diff as _diff
from . import follow as _follow
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["KueuePlugin"]
_restore_at, _verify_at = _pointview.point_in_time(_restore.run_restore, _verify.run_verify)  # `--at` of a chain too


class KueuePlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for Kueue (CRDs kueue.x-k8s.io v1beta2; v1beta1 read too)."""

    name = "kueue"
    description = "Kueue quotas and policies (flavors, cohorts, queues, checks), restored in dependency order"
    schema = SCHEMA
    takes_transforms = True
    discover = staticmethod(_backup.discover_inventory)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore_at)
    verify = staticmethod(_verify_at)
    dependencies = staticmethod(_deps.dependencies)
    diff = staticmethod(_diff.diff)
    # continuous backup of the config kinds, and a warm standby hydrated from it (drtool.kube)
    follow = staticmethod(_follow.follow)
    fold = staticmethod(_pointview.fold)
    hydrate = staticmethod(_standby.hydrate)
    settle = staticmethod(_standby.settle)
    release = staticmethod(_standby.release)

    def platform_checks(self) -> Sequence[PlatformCheck]:
        """``kueue-admits``: the restored queues admit a probe Job onto the expected flavor (Kueue decides)."""
        from . import admits_check

        return (admits_check.CHECK,)
