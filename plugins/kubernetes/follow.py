"""`drtool follow -p kubernetes`: the kubernetes plugin's ``Scope`` for drtool.kube.follow.

It follows what a backup of the same source settings lists: every served type the filters select (watch
verb required), objects kept by the same namespace filters, label selector and skip rules. Namespaces and
CRDs, which a backup keeps when selected *or needed* by the backed-up objects, are followed when the
filters select them (by default: all); one needed only by objects is in the chain's full backup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.kube.client import KubeClient
from drtool.kube.discovery import NAMESPACES, ResourceType, crd_index, discover
from drtool.kube.follow import Obj, Watched
from drtool.kube.follow import follow as follow_scope
from drtool.kube.listing import connect
from drtool.kube.settings import BackupOptions, Filters
from drtool.kube.skips import object_rule
from drtool.plugin.contract import BackupContext, FollowContext

from . import backup as _backup
from . import facts as _facts
from .selection import select


class KubernetesScope:
    def __init__(self, source: Mapping[str, Any]) -> None:
        self.source = source
        self.filters, self.opts = Filters.from_mapping(source), BackupOptions.from_mapping(source)

    def connect(self) -> KubeClient:
        return connect(self.source)

    def full(self, ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(self.source, ctx)

    def watched(self, client: KubeClient) -> dict[str, Watched]:
        sel = select(discover(client, crd_index(client, self.opts.page_size))[0], self.filters)
        with_selector = _facts.selector_services(client, self.opts.page_size)
        params = {"labelSelector": self.filters.label_selector} if self.filters.label_selector else {}
        out = {t.key: Watched(t, self._keep(t, with_selector), params) for t in sel.listed if "watch" in t.verbs}
        for key, t in sel.deferred.items():
            if sel.wanted(key, self.filters) and "watch" in t.verbs:
                out[key] = Watched(t, self._keep(t, set()))
        return out

    def _keep(self, t: ResourceType, with_selector: set[str]) -> Any:
        rule = object_rule(t.key, with_selector) if self.filters.default_skips else None
        filters = self.filters

        def keep(obj: Obj) -> bool:
            meta = obj.get("metadata") or {}
            if t.namespaced and not filters.namespace_selected(meta.get("namespace", "")):
                return False
            if t.key == NAMESPACES and not filters.namespace_selected(meta.get("name", "")):
                return False
            return rule is None or rule(obj) is None

        return keep


def follow(source: Mapping[str, Any], ctx: FollowContext) -> None:
    follow_scope(KubernetesScope(source), ctx)
