"""The kubernetes plugin: every object the API serves (CRDs and custom resources included), rebuilt in a
different, empty cluster in dependency order.

Source settings: ``kubeconfig`` (default $KUBECONFIG, then ~/.kube/config, then in-cluster), ``context``,
filters ``include_namespaces``/``exclude_namespaces`` (globs), ``include_resources``/``exclude_resources``
(``resource.group`` globs; ``configmaps``, ``clusterqueues.kueue.x-k8s.io``), ``label_selector``,
``cluster_resources`` (auto), ``default_skips`` (true), and tuning ``page_size`` (500), ``workers`` (4),
``compress`` (false), ``timeout``.

Target settings: ``kubeconfig``, ``context`` (as above), ``namespace_map``. Restore options:
``existing`` (update|replace|skip|fail), ``namespace_map`` ("a=b,c=d"), ``dry_run``, ``restore_status`` (true),
``workers`` (16), ``crd_timeout`` (60 s), ``image_registry_map`` ("old-host=new-host,...": restored workloads
pull from the registry the images plugin restored to; docs/images.md). docs/kubernetes.md explains each, with
the skip list and the restore order and their reasons.
"""

from __future__ import annotations

from collections.abc import Sequence

from drtool.kube import pointview as _pointview
from drtool.kube import references as _references
from drtool.kube import standby as _standby
from drtool.kube.restore import restore_objects
from drtool.plugin.checks import PlatformCheck
from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import follow as _follow
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["KubernetesPlugin"]
_restore, _verify_at = _pointview.point_in_time(restore_objects, _verify.run_verify)  # `--at` of a chain too


class KubernetesPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for the Kubernetes API (tested with kube-apiserver 1.37)."""

    name = "kubernetes"
    description = "Kubernetes API objects (CRDs, custom resources, built-ins) as cleaned JSON, re-applied in order"
    schema = SCHEMA
    restores_cluster = True
    takes_transforms = True
    discover = staticmethod(_backup.discover_inventory)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore)
    verify = staticmethod(_verify_at)
    dependencies = staticmethod(_references.dependencies)
    # continuous backup (a full, then deltas of every type's watch) and a warm standby hydrated from it
    follow = staticmethod(_follow.follow)
    fold = staticmethod(_pointview.fold)
    hydrate = staticmethod(_standby.hydrate)
    settle = staticmethod(_standby.settle)
    release = staticmethod(_standby.release)

    def platform_checks(self) -> Sequence[PlatformCheck]:
        """``workloads-ready`` (restored Deployments and StatefulSets serve) and ``gc-stable`` (the garbage
        collector deletes nothing restored): the restored cluster's own controllers judge the restore."""
        from . import gc_check, workloads_check

        return (workloads_check.CHECK, gc_check.CHECK)
