"""Kueue's quotas and queue wiring reduced to what an operator compares: a View of one side (backup or live).

Quota is ``(ClusterQueue or Cohort, flavor, resource) -> nominalQuota, borrowingLimit, lendingLimit``;
wiring is LocalQueue -> ClusterQueue, ClusterQueue -> cohort and Cohort -> parent. Quantities compare by
value (``768Gi`` equals ``824633720832``), because the API server stores a custom resource's quantity as
written and two clusters configured by different tools spell the same quota differently. An unset
borrowingLimit or lendingLimit means "no limit" in Kueue, which is different from ``0``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from .kinds import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES
from .refs import object_key

Obj = dict[str, Any]
QUOTA_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")
VIEW_TYPES = (CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES)


@dataclasses.dataclass(frozen=True, order=True)
class QuotaKey:
    kind: str  # ClusterQueue or Cohort
    owner: str
    flavor: str
    resource: str

    def __str__(self) -> str:
        return f"{self.kind} {self.owner} {self.flavor}/{self.resource}"


@dataclasses.dataclass
class View:
    quotas: dict[QuotaKey, dict[str, Any]] = dataclasses.field(default_factory=dict)  # field -> value as written
    local_queues: dict[str, str] = dataclasses.field(default_factory=dict)  # namespace/name -> ClusterQueue
    cohort_of: dict[str, str] = dataclasses.field(default_factory=dict)  # ClusterQueue -> cohort ("": none)
    parent_of: dict[str, str] = dataclasses.field(default_factory=dict)  # Cohort -> parent ("": a root)

    @classmethod
    def build(cls, objects: Mapping[str, Iterable[Obj]]) -> View:
        view = cls()
        for obj in objects.get(CLUSTER_QUEUES, ()):
            name, spec = obj["metadata"]["name"], obj.get("spec") or {}
            view.cohort_of[name] = spec.get("cohortName") or spec.get("cohort") or ""  # v1beta2, v1beta1
            view.quotas.update(_quotas("ClusterQueue", name, spec))
        for obj in objects.get(COHORTS, ()):
            name, spec = obj["metadata"]["name"], obj.get("spec") or {}
            view.parent_of[name] = spec.get("parentName") or ""
            view.quotas.update(_quotas("Cohort", name, spec))
        for obj in objects.get(LOCAL_QUEUES, ()):
            view.local_queues[object_key(obj)] = (obj.get("spec") or {}).get("clusterQueue") or ""
        return view

    @property
    def counts(self) -> dict[str, int]:
        return {
            "cluster_queues": len(self.cohort_of),
            "cohorts": len(self.parent_of),
            "local_queues": len(self.local_queues),
            "quota_entries": len(self.quotas),
        }


def _quotas(kind: str, owner: str, spec: Obj) -> Iterable[tuple[QuotaKey, dict[str, Any]]]:
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                values = {f: res[f] for f in QUOTA_FIELDS if res.get(f) is not None}
                yield QuotaKey(kind, owner, flavor.get("name", ""), res.get("name", "")), values


def quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a number (None: unset); an unparsable one compares as its text."""
    if value is None:
        return None
    from kubernetes.utils.quantity import parse_quantity  # imported late: see drtool.kube.kubeconfig

    try:
        return parse_quantity(value)
    except ValueError:
        return Decimal("NaN")  # never equal: an unparsable quota is always reported


def same_quantity(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    qa, qb = quantity(a), quantity(b)
    return qa == qb if qa is not None and qb is not None and not qa.is_nan() else str(a) == str(b)


def differing_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(f for f in QUOTA_FIELDS if not same_quantity(a.get(f), b.get(f)))


def cohort_levels(parent_of: Mapping[str, str]) -> tuple[list[list[str]], list[str]]:
    """Cohorts by depth, roots first (a parent outside ``parent_of`` makes a root), and the cohorts no
    root reaches: the members of a cycle and their descendants (Kueue disables a cycle's members)."""
    children: dict[str, list[str]] = {}
    roots = []
    for name, parent in parent_of.items():
        if parent and parent in parent_of:
            children.setdefault(parent, []).append(name)
        else:
            roots.append(name)
    levels: list[list[str]] = []
    reached: set[str] = set()
    current = sorted(roots)
    while current:
        levels.append(current)
        reached.update(current)
        current = sorted(c for p in current for c in children.get(p, ()))
    return levels, sorted(set(parent_of) - reached)
