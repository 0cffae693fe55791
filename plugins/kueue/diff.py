"""Quota and queue-wiring differences between a backup and a live cluster (``drtool diff --plugin kueue``).

The question it answers before (or instead of) a restore: "if this cluster lost its Kueue configuration
now, what would the backup give back, and what would change?" — per queue, flavor and resource, the
nominalQuota, borrowingLimit and lendingLimit on each side, and which LocalQueue feeds which
ClusterQueue, which cohort each ClusterQueue is in, and each Cohort's parent. verify uses the same
comparison after a restore. Status is not compared: it is computed by Kueue's controller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from drtool.kube.client import KubeClient
from drtool.plugin.contract import RestoreContext

from .bundle import load
from .cluster import Served, connect, list_objects, require_kueue, served
from .quotas import QUOTA_FIELDS, VIEW_TYPES, QuotaKey, View, differing_fields

ABSENT = "—"  # the whole entry or object is not on that side
UNSET = "unset"  # the entry is there, the field is not (no limit)


@dataclasses.dataclass(frozen=True)
class QuotaChange:
    key: QuotaKey
    backup: Mapping[str, Any] | None  # None: no such (queue, flavor, resource) in the backup
    target: Mapping[str, Any] | None
    fields: tuple[str, ...]  # the fields that differ

    @property
    def state(self) -> str:
        return "only in backup" if self.target is None else "only in target" if self.backup is None else "changed"

    def cell(self, field: str) -> str:
        b = ABSENT if self.backup is None else _text(self.backup.get(field))
        t = ABSENT if self.target is None else _text(self.target.get(field))
        return f"{b} → {t}" if field in self.fields else b

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.key), "state": self.state, "fields": list(self.fields)} | {
            "backup": dict(self.backup) if self.backup is not None else None,
            "target": dict(self.target) if self.target is not None else None,
        }


@dataclasses.dataclass(frozen=True)
class LinkChange:
    kind: str  # LocalQueue, ClusterQueue, Cohort
    name: str
    field: str  # clusterQueue, cohortName, parentName
    backup: str | None  # None: the object is not in the backup; "": the field is empty
    target: str | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _text(value: Any) -> str:
    return UNSET if value is None else str(value)


def _link_text(value: str | None) -> str:
    return ABSENT if value is None else value or "(none)"


@dataclasses.dataclass
class KueueDiff:
    backup_id: str
    server: str
    quotas: list[QuotaChange]
    links: list[LinkChange]
    compared: dict[str, dict[str, int]]  # side -> counts

    @property
    def equal(self) -> bool:
        return not self.quotas and not self.links

    @property
    def summary(self) -> str:
        b = self.compared["backup"]
        what = (
            f"{b['cluster_queues']} ClusterQueues, {b['cohorts']} Cohorts, {b['local_queues']} LocalQueues, "
            f"{b['quota_entries']} quota entries in the backup"
        )
        if self.equal:
            return f"backup {self.backup_id} and {self.server}: no differences ({what})"
        return (
            f"backup {self.backup_id} and {self.server}: {len(self.quotas)} quota difference(s), "
            f"{len(self.links)} queue wiring difference(s) ({what})"
        )

    def tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        """(title, columns, rows) for each non-empty table; cells read ``backup → target``."""
        out = []
        if self.quotas:
            columns = ["kind", "queue", "flavor", "resource", *QUOTA_FIELDS, "difference"]
            rows = [
                [q.key.kind, q.key.owner, q.key.flavor, q.key.resource, *(q.cell(f) for f in QUOTA_FIELDS), q.state]
                for q in self.quotas
            ]
            out.append(("quota (backup → target)", columns, rows))
        if self.links:
            rows = [[c.kind, c.name, c.field, _link_text(c.backup), _link_text(c.target)] for c in self.links]
            out.append(("queue wiring", ["kind", "name", "field", "backup", "target"], rows))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "backup": self.backup_id,
            "target": self.server,
            "equal": self.equal,
            "compared": self.compared,
            "quotas": [q.to_json() for q in self.quotas],
            "links": [c.to_json() for c in self.links],
        }


def compare_quotas(backup: View, target: View) -> list[QuotaChange]:
    out = []
    for key in sorted(set(backup.quotas) | set(target.quotas)):
        b, t = backup.quotas.get(key), target.quotas.get(key)
        if b is None or t is None:
            present = b if b is not None else t
            out.append(QuotaChange(key, b, t, tuple(f for f in QUOTA_FIELDS if f in (present or {}))))
        elif fields := differing_fields(b, t):
            out.append(QuotaChange(key, b, t, fields))
    return out


def _links(kind: str, field: str, backup: Mapping[str, str], target: Mapping[str, str]) -> list[LinkChange]:
    names = sorted(set(backup) | set(target))
    return [LinkChange(kind, n, field, backup.get(n), target.get(n)) for n in names if backup.get(n) != target.get(n)]


def compare_links(backup: View, target: View) -> list[LinkChange]:
    return (
        _links("LocalQueue", "clusterQueue", backup.local_queues, target.local_queues)
        + _links("ClusterQueue", "cohortName", backup.cohort_of, target.cohort_of)
        + _links("Cohort", "parentName", backup.parent_of, target.parent_of)
    )


def live_objects(client: KubeClient, here: Served) -> dict[str, list[dict[str, Any]]]:
    """The target's ClusterQueues, Cohorts and LocalQueues, read in the versions it stores them in."""
    kueue = here.kueue()
    require_kueue(kueue, client.server)
    return {k: list_objects(client, kueue[k]) for k in VIEW_TYPES if k in kueue}


def diff(ctx: RestoreContext, target: Mapping[str, Any]) -> KueueDiff:
    backup = View.build(load(ctx, VIEW_TYPES).objects())
    client = connect(target)
    live = View.build(live_objects(client, served(client)))
    return KueueDiff(
        ctx.backup_id,
        client.server,
        compare_quotas(backup, live),
        compare_links(backup, live),
        {"backup": backup.counts, "target": live.counts},
    )
