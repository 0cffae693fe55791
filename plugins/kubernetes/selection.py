"""Which resource types a backup lists, and why each of the others is left out."""

from __future__ import annotations

import dataclasses

from drtool.kube.discovery import CRDS, NAMESPACES, ResourceType
from drtool.kube.settings import Filters
from drtool.kube.skips import resource_skip_reason

# listed last, keeping what the filters select plus what the backed-up objects need
DEFERRED = (NAMESPACES, CRDS)


@dataclasses.dataclass
class Selection:
    listed: list[ResourceType]  # listed concurrently, one artifact each
    deferred: dict[str, ResourceType]  # namespaces and CRDs
    skipped: dict[str, str]  # resource.group -> reason

    def wanted(self, key: str, filters: Filters) -> bool:
        """Whether the filters select a deferred type in its own right (beyond what others need)."""
        return key not in self.skipped and filters.resource_selected(*_split(key))


def _split(key: str) -> tuple[str, str]:
    resource, _, group = key.partition(".")
    return resource, group


def select(types: list[ResourceType], filters: Filters) -> Selection:
    sel = Selection([], {}, {})
    for t in types:
        reason = skip_reason(t, filters)
        if t.key in DEFERRED and not filters.explicitly_excluded(t.resource, t.group):
            sel.deferred[t.key] = t  # what the filters select, plus what the backed-up objects need
            if reason:
                sel.skipped[t.key] = f"{reason} (kept: those the backed-up objects need)"
        elif reason:
            sel.skipped[t.key] = reason
        else:
            sel.listed.append(t)
    return sel


def skip_reason(t: ResourceType, filters: Filters) -> str | None:
    if "list" not in t.verbs or "create" not in t.verbs:
        return "cannot be listed and created (a virtual or review API)"
    if not filters.resource_selected(t.resource, t.group):
        return "left out by include_resources/exclude_resources"
    if filters.default_skips and not filters.explicitly_included(t.resource, t.group):
        reason = resource_skip_reason(t.resource, t.group)
        if reason:
            return reason
    if not t.namespaced and not filters.wants_cluster_resources():
        return "cluster-scoped, and the backup is limited to include_namespaces (set cluster_resources: true)"
    return None
