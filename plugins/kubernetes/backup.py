"""Back up what an API server serves: one streamed artifact per served resource type, listed concurrently.

Listing and cleaning are the toolkit's (``drtool.kube.listing``). Namespaces and CRDs are
written last: they keep what the filters select, plus every namespace and CRD that the backed-up objects
need, so a filtered backup still restores into an empty cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from drtool.kube.discovery import ResourceType, crd_index, discover
from drtool.kube.listing import BackupRun, Cancelled, TypeResult, backup_type, connect
from drtool.kube.settings import BackupOptions, Filters
from drtool.kube.skips import object_rule
from drtool.plugin.contract import BackupContext, Inventory

from . import facts as _facts
from .selection import CRDS, NAMESPACES, Selection, select

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    client = connect(source)
    filters, opts = Filters.from_mapping(source), BackupOptions.from_mapping(source)
    version = client.get("/version")
    crds = crd_index(client, opts.page_size)
    types, stale = discover(client, crds)
    sel = select(types, filters)
    facts, with_selector = _facts.collect(client, opts.page_size)
    run = BackupRun(client, ctx, filters, opts)
    results = _list_all(run, sel.listed, with_selector)
    results += _deferred(run, sel, results)
    with contextlib.suppress(AttributeError):
        run.progress.done()
    return {
        "server": client.server,
        "server_version": version.get("gitVersion"),
        "objects": sum(r.count for r in results),
        "resources": {r.type.key: r.meta() for r in sorted(results, key=lambda r: r.type.key) if _notable(r)},
        "empty_resources": sorted(r.type.key for r in results if not _notable(r)),
        "skipped_resources": dict(sorted(sel.skipped.items())),
        "unavailable_apis": stale,
        "filters": filters.describe(),
        "failure_domain": facts.domain(),
        "failure_domain_evidence": facts.evidence,
    }


def _notable(r: TypeResult) -> bool:
    return bool(r.count or r.skipped or r.gone or not r.consistent)


def _list_all(run: BackupRun, types: list[ResourceType], with_selector: set[str]) -> list[TypeResult]:
    """List every type on a bounded pool; the first failure cancels the rest and is raised."""
    with ThreadPoolExecutor(max_workers=run.opts.workers, thread_name_prefix="drtool-k8s-list") as pool:
        futures = [pool.submit(backup_type, run, t, object_rule(t.key, with_selector)) for t in types]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.exception() for f in done):
            run.stop.set()
        wait(futures)
    for f in futures:
        if f.exception() is not None and not isinstance(f.exception(), Cancelled):
            raise f.exception()  # type: ignore[misc]
    return [f.result() for f in futures]


def _deferred(run: BackupRun, sel: Selection, results: list[TypeResult]) -> list[TypeResult]:
    """Namespaces and CRDs: those selected in their own right, plus those the listed objects need."""
    out = []
    if NAMESPACES in sel.deferred:
        needed = set().union(*(r.namespaces for r in results)) if results else set()
        keep = _keep(run, sel, NAMESPACES, needed, run.filters.namespace_selected)
        out.append(backup_type(run, sel.deferred[NAMESPACES], None, keep=keep))
    if CRDS in sel.deferred:
        needed = {f"{r.type.resource}.{r.type.group}" for r in results if r.type.crd and r.count}
        out.append(backup_type(run, sel.deferred[CRDS], None, keep=_keep(run, sel, CRDS, needed, lambda _: True)))
    return out


def _keep(
    run: BackupRun, sel: Selection, key: str, needed: set[str], allowed: Callable[[str], bool]
) -> Callable[[dict[str, Any]], bool]:
    """Which objects of a deferred type to keep: the ``needed`` names, and when the filters select the
    type itself, those its label selector matches (one metadata-only LIST) and ``allowed`` accepts."""
    if not sel.wanted(key, run.filters):
        return lambda obj: obj["metadata"]["name"] in needed
    matching = _selected_names(run, sel.deferred[key]) if run.filters.label_selector else None

    def keep(obj: dict[str, Any]) -> bool:
        name = obj["metadata"]["name"]
        return name in needed or ((matching is None or name in matching) and allowed(name))

    return keep


def _selected_names(run: BackupRun, t: ResourceType) -> set[str]:
    """Names of ``t`` (cluster-scoped) that match the label selector."""
    names: set[str] = set()
    pages = run.client.list_pages(t.path(), run.params(), limit=run.opts.page_size, accept=METADATA_LIST)
    for page in pages:
        names.update(item["metadata"]["name"] for item in page.get("items") or [])
    return names


def discover_inventory(source: Mapping[str, Any]) -> Inventory:
    """Counts per type, from one ``limit=1`` LIST each (the server's remainingItemCount)."""
    client = connect(source)
    filters, opts = Filters.from_mapping(source), BackupOptions.from_mapping(source)
    sel = select(discover(client, crd_index(client, opts.page_size))[0], filters)
    counts: dict[str, int] = {}
    for t in [*sel.listed, *sel.deferred.values()]:
        page = client.get(t.path(), {"limit": 1})
        n = len(page.get("items") or []) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)
        if n:
            counts[t.key] = n
    return Inventory(counts=counts, details={"server": client.server, "skipped": sel.skipped})
