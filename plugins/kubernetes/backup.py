"""Back up what an API server serves: one streamed artifact per resource type, listed concurrently.

Each type is LISTed in pages (``limit``/``continue``) and every page is cleaned and written before the
next is fetched, so memory is bounded by ``workers * page_size`` objects whatever the cluster's size.
Objects arrive in the server's key order (namespace, then name), which makes the artifact bytes of an
unchanged cluster identical from one backup to the next — and so deduplicated by the store.

Namespaces and CRDs are written last: they keep what the filters select, plus every namespace and CRD
that the backed-up objects need, so a filtered backup still restores into an empty cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from drtool.errors import DrtoolError, SourceError
from drtool.plugin.contract import BackupContext, Inventory

from . import facts as _facts
from .client import ApiError, KubeClient
from .discovery import ResourceType, crd_index, discover
from .objects import dumps, object_key, to_record
from .selection import CRDS, NAMESPACES, Selection, select
from .settings import BackupOptions, Connection, Filters
from .skips import object_rule

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
Rule = Callable[[dict[str, Any]], str | None]


@dataclasses.dataclass
class TypeResult:
    """What listing one type produced (recorded per type in the plugin's manifest meta)."""

    type: ResourceType
    count: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    namespaces: set[str] = dataclasses.field(default_factory=set)
    resource_version: str | None = None
    consistent: bool = True
    ordered: bool = True
    gone: bool = False

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"artifact": self.type.artifact if self.count else None, "count": self.count}
        out |= {"version": self.type.version, "resource_version": self.resource_version}
        if self.skipped:
            out["skipped"] = dict(sorted(self.skipped.items()))
        if not self.consistent:
            out["consistent"] = False  # a continue token expired: pages span several revisions
        if not self.ordered:
            out["ordered"] = False
        if self.gone:
            out["gone"] = True  # no longer served when it was listed
        return out


class BackupRun:
    """Shared state of one backup: client, filters, the artifact context, cancellation."""

    def __init__(self, client: KubeClient, ctx: BackupContext, filters: Filters, opts: BackupOptions) -> None:
        self.client, self.ctx, self.filters, self.opts = client, ctx, filters, opts
        self.stop = threading.Event()
        self.progress = ctx.progress("objects")

    def params(self, selector: bool = True) -> dict[str, Any]:
        return {"labelSelector": self.filters.label_selector} if selector and self.filters.label_selector else {}

    def paths(self, t: ResourceType) -> list[str]:
        exact = self.filters.exact_namespaces() if t.namespaced else None
        return [t.path(ns) for ns in sorted(exact)] if exact is not None else [t.path()]


def connect(source: Mapping[str, Any]) -> KubeClient:
    return KubeClient(Connection.from_mapping(source))


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
        if f.exception() is not None and not isinstance(f.exception(), _Cancelled):
            raise f.exception()  # type: ignore[misc]
    return [f.result() for f in futures]


class _Cancelled(DrtoolError):
    """Another type failed; this one stopped early (never surfaces: the first real error is raised)."""


def backup_type(
    run: BackupRun, t: ResourceType, rule: Rule | None, keep: Callable[[dict[str, Any]], bool] | None = None
) -> TypeResult:
    """Stream one type into its artifact (opened at the first object, so empty types leave none)."""
    result = TypeResult(t)
    last = ""
    if run.stop.is_set():
        raise _Cancelled("cancelled")
    try:
        with contextlib.ExitStack() as stack:
            sink = None
            for path in run.paths(t):
                for page in run.client.list_pages(path, run.params(keep is None), limit=run.opts.page_size):
                    if run.stop.is_set():
                        raise _Cancelled("cancelled")
                    lines, last = _page_lines(run, t, page, rule, keep, result, last)
                    if lines and sink is None:
                        sink = stack.enter_context(run.ctx.artifact(t.artifact, meta=t.meta(), sensitive=_sensitive(t)))
                    if lines:
                        sink.write(b"".join(lines))
                        run.progress.advance(len(lines))
    except ApiError as exc:
        if exc.status == 404 and not result.count:  # its CRD or aggregated API went away since discovery
            result.gone = True
            return result
        raise SourceError(f"listing {t.key}: {exc.message}", exc.hint) from None
    except SourceError as exc:
        raise SourceError(f"{exc.message} while listing {t.key}", exc.hint) from None
    return result


def _sensitive(t: ResourceType) -> bool:
    return t.key == "secrets"


def _page_lines(
    run: BackupRun,
    t: ResourceType,
    page: dict[str, Any],
    rule: Rule | None,
    keep: Callable[[dict], bool] | None,
    result: TypeResult,
    last: str,
) -> tuple[list[bytes], str]:
    result.resource_version = result.resource_version or (page.get("metadata") or {}).get("resourceVersion")
    result.consistent = result.consistent and not page.get("inconsistent")
    lines = []
    for item in page.get("items") or []:
        meta = item.get("metadata") or {}
        if t.namespaced and not run.filters.namespace_selected(meta.get("namespace", "")):
            continue
        if keep is not None and not keep(item):
            continue
        reason = rule(item) if rule and run.filters.default_skips else None
        if reason:
            result.skipped[reason] = result.skipped.get(reason, 0) + 1
            continue
        key = object_key(item)
        result.ordered = result.ordered and key >= last
        last = key
        lines.append(dumps(to_record(item, t)) + b"\n")
        result.count += 1
        if t.namespaced:
            result.namespaces.add(meta["namespace"])
    return lines, last


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
