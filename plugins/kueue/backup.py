"""Back up Kueue's configuration: every config kind the server serves, plus what it needs to stand alone.

Each kind is listed and written by the toolkit's ``backup_type`` (paged LIST, cleaned objects,
one NDJSON artifact per type), so a kueue backup has the kubernetes plugin's artifact format and its
restore machinery applies unchanged. Added, so that a backup restores into an empty cluster:
- the kubeconfig Secrets MultiKueueClusters name (from Kueue's namespace only; sensitive artifact);
- the Namespace objects of the LocalQueues and of those Secrets;
- every Kueue CRD (schema, not state; a restore installs only the ones a target lacks).
Workloads and every status are runtime state and are not restored (``kinds.RUNTIME``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from drtool.kube.client import KubeClient
from drtool.kube.listing import BackupRun, TypeResult, backup_type
from drtool.kube.settings import BackupOptions, Filters
from drtool.plugin.contract import BackupContext, Inventory
from drtool.plugin.toolkit.settings import as_number

from .cluster import Served, connect, require_kueue, served
from .kinds import (
    CLUSTER_QUEUES,
    CONFIG,
    CRDS,
    DEFAULT_KUEUE_NAMESPACE,
    MK_CLUSTERS,
    NAMESPACES,
    RUNTIME,
    SECRETS,
)
from .refs import cluster_secret, missing, object_key

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class SourceSettings:
    """``kueue_namespace``: where the Kueue manager runs (its kubeconfig Secrets live there)."""

    kueue_namespace: str = DEFAULT_KUEUE_NAMESPACE
    page_size: int = 500

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> SourceSettings:
        return cls(
            kueue_namespace=str(m.get("kueue_namespace") or DEFAULT_KUEUE_NAMESPACE),
            page_size=max(1, int(as_number(m.get("page_size"), 500, "page_size"))),
        )


class _Seen:
    """The objects each type's listing streamed into its artifact, kept for the reference check and to
    know which Secrets and namespaces to add. Hooked in as ``backup_type``'s ``keep`` filter (which keeps
    everything): Kueue configuration is hundreds of small objects, so holding them costs nothing."""

    def __init__(self) -> None:
        self.objects: dict[str, list[Obj]] = {}

    def keep(self, key: str, wanted: Callable[[Obj], bool] = lambda _o: True) -> Callable[[Obj], bool]:
        bucket = self.objects.setdefault(key, [])

        def hook(obj: Obj) -> bool:
            if not wanted(obj):
                return False
            bucket.append(obj)
            return True

        return hook

    def names(self, key: str) -> set[str]:
        return {object_key(o) for o in self.objects.get(key, ())}


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    settings = SourceSettings.from_mapping(source)
    client = connect(source)
    found = served(client)
    kueue = found.kueue()
    require_kueue(kueue, client.server)
    run = BackupRun(client, ctx, Filters(), BackupOptions(page_size=settings.page_size, workers=1))
    seen = _Seen()
    results = [backup_type(run, kueue[k], None, keep=seen.keep(k)) for k in CONFIG if k in kueue]
    results += _secrets(ctx, client, found, seen, settings)
    results += _namespaces(run, found, seen, settings)
    crd_names = {f"{t.resource}.{t.group}" for t in kueue.values()}
    results.append(backup_type(run, found.types[CRDS], None, keep=lambda o: o["metadata"]["name"] in crd_names))
    dangling = missing(seen.objects, lambda k, name: name in seen.names(k), settings.kueue_namespace)
    return {
        "server": client.server,
        "kueue_namespace": settings.kueue_namespace,
        "api_versions": {k: t.version for k, t in sorted(kueue.items())},
        "objects": {r.type.key: r.count for r in results},
        "not_served": [k for k in CONFIG if k not in kueue],
        "not_backed_up": {k: why for k, why in RUNTIME.items() if k in kueue}
        | {k: "unknown Kueue kind (newer Kueue?)" for k in kueue if k not in CONFIG and k not in RUNTIME},
        "dangling_in_source": [dataclasses.asdict(m) for m in dangling],
        "inactive_in_source": inactive_queues(seen.objects.get(CLUSTER_QUEUES, [])),
    }


def inactive_queues(cluster_queues: list[Obj]) -> dict[str, str]:
    """ClusterQueue -> Kueue's reason, for each one the source's Kueue reported not Active: what a verify of a
    restore compares the target's verdict with (status itself is runtime state and is not restored)."""
    out = {}
    for cq in cluster_queues:
        active = next((c for c in (cq.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), None)
        if active is not None and active.get("status") != "True":
            out[cq["metadata"]["name"]] = str(active.get("reason") or "")
    return dict(sorted(out.items()))


def _secrets(
    ctx: BackupContext, client: KubeClient, found: Served, seen: _Seen, settings: SourceSettings
) -> list[TypeResult]:
    """The kubeconfig Secrets the MultiKueueClusters name, listed in Kueue's namespace only."""
    wanted = {
        ref[1] for obj in seen.objects.get(MK_CLUSTERS, ()) for ref in cluster_secret(obj, settings.kueue_namespace)
    }
    if not wanted:
        return []
    filters = Filters(include_namespaces=(settings.kueue_namespace,))
    run = BackupRun(client, ctx, filters, BackupOptions(page_size=settings.page_size, workers=1))
    keep = seen.keep(SECRETS, lambda o: object_key(o) in wanted)
    return [backup_type(run, found.types[SECRETS], None, keep=keep)]


def _namespaces(run: BackupRun, found: Served, seen: _Seen, settings: SourceSettings) -> list[TypeResult]:
    """The namespaces the backed-up LocalQueues and Secrets live in (created by a restore when missing)."""
    needed = {
        o["metadata"]["namespace"] for objs in seen.objects.values() for o in objs if o["metadata"].get("namespace")
    }
    if not needed:
        return []
    return [backup_type(run, found.types[NAMESPACES], None, keep=lambda o: o["metadata"]["name"] in needed)]


def discover_inventory(source: Mapping[str, Any]) -> Inventory:
    """Objects per Kueue config kind, from one ``limit=1`` LIST each (the server's remainingItemCount)."""
    client = connect(source)
    kueue = served(client).kueue()
    require_kueue(kueue, client.server)
    counts: dict[str, int] = {}
    for k in CONFIG:
        if k in kueue:
            page = client.get(kueue[k].path(), {"limit": 1})
            counts[k] = len(page.get("items") or []) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)
    details = {"server": client.server, "versions": {k: t.version for k, t in kueue.items()}}
    return Inventory(counts=counts, details=details | {"not_backed_up": sorted(k for k in kueue if k in RUNTIME)})
