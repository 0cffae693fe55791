"""The kueue plugin: Kueue's quotas and policies as one unit, rebuilt in Kueue's dependency order.

Backs up configuration only — Topologies, ResourceFlavors, WorkloadPriorityClasses, MultiKueueClusters
(with the kubeconfig Secrets they name), MultiKueueConfigs, ProvisioningRequestConfigs, AdmissionChecks,
Cohorts, ClusterQueues, LocalQueues — never Workloads or status, which are Kueue's runtime state. Like the
kubernetes plugin it is built on the toolkit's Kubernetes machinery (drtool/plugin/toolkit/kube): same
client, discovery, artifact format and server-side apply.

Source settings: ``kubeconfig``, ``context``, ``kueue_namespace`` (kueue-system), ``page_size``.
Target settings: ``kubeconfig``, ``context``. Restore options: ``allow_missing`` (false, true or a list of
reference kinds), ``install_crds`` (true), ``existing`` (update|skip|fail), ``dry_run``, ``workers``,
``crd_timeout``. ``diff`` compares a backup's quotas with a live cluster. docs/kueue.md explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult
from drtool.plugin.toolkit.kube.lab import SeededCluster

from . import backup as _backup
from . import deps as _deps
from . import diff as _diff
from . import restore as _restore
from . import verify as _verify

__all__ = ["KueuePlugin"]


class KueuePlugin:
    """Implements ``drtool.plugin.contract.Plugin`` for Kueue (CRDs kueue.x-k8s.io v1beta2; v1beta1 read too)."""

    name = "kueue"
    description = "Kueue quotas and policies (flavors, cohorts, queues, checks), restored in dependency order"
    lab = SeededCluster()  # drtool.plugin.contract.LabSupport: seed a lab source, prepare a lab target

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover_inventory(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _verify.run_verify(ctx, target, _restore.Options.parse(target, options))

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        return _deps.dependencies(ctx, target)

    def diff(self, ctx: RestoreContext, target: Mapping[str, Any]) -> _diff.KueueDiff:
        """Quota and queue-wiring differences between this backup and the live cluster ``target``."""
        return _diff.diff(ctx, target)
