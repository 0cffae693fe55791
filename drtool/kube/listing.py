"""Listing resource types into artifacts: paged LISTs, cleaned objects, one artifact per type.

Each type is LISTed in pages (``limit``/``continue``) and every page is cleaned and written before the
next is fetched, so memory is bounded by ``workers * page_size`` objects whatever the cluster's size.
Objects arrive in the server's key order (namespace, then name), which makes the artifact bytes of an
unchanged cluster identical from one backup to the next, and so deduplicated by the store. The kubernetes
plugin lists every served type this way; the kueue and dns-certs plugins list their own kinds, choosing
objects with a ``keep`` filter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from drtool.errors import DrtoolError, SourceError
from drtool.plugin.contract import BackupContext

from . import left
from .client import ApiError, KubeClient
from .discovery import ResourceType
from .objects import dumps, object_key, to_record
from .settings import BackupOptions, Connection, Filters

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
    left: int = 0  # skipped objects recorded with the owner that recreates them (``left.py``)

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"artifact": self.type.artifact if self.count else None, "count": self.count}
        out |= {"version": self.type.version, "resource_version": self.resource_version}
        if self.skipped:
            out["skipped"] = dict(sorted(self.skipped.items()))
        if self.left:
            out["left_to_controllers"] = self.left
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


class Cancelled(DrtoolError):
    """Another type failed; this one stopped early (never surfaces: the first real error is raised)."""


def backup_type(
    run: BackupRun, t: ResourceType, rule: Rule | None, keep: Callable[[dict[str, Any]], bool] | None = None
) -> TypeResult:
    """Stream one type into its artifact (opened at the first object, so empty types leave none); the objects
    a rule skips because a controller recreates them go to a second one (``left.py``)."""
    result = TypeResult(t)
    last = ""
    if run.stop.is_set():
        raise Cancelled("cancelled")
    try:
        with contextlib.ExitStack() as stack:
            sinks: dict[str, Any] = {}

            def write(name: str, lines: list[bytes], meta: dict[str, Any], sensitive: bool) -> None:
                if lines and name not in sinks:
                    sinks[name] = stack.enter_context(run.ctx.artifact(name, meta=meta, sensitive=sensitive))
                if lines:
                    sinks[name].write(b"".join(lines))

            for path in run.paths(t):
                for page in run.client.list_pages(path, run.params(keep is None), limit=run.opts.page_size):
                    if run.stop.is_set():
                        raise Cancelled("cancelled")
                    lines, left_lines, last = _page_lines(run, t, page, rule, keep, result, last)
                    write(t.artifact, lines, t.meta(), _sensitive(t))
                    write(left.artifact_name(t), left_lines, left.artifact_meta(t), False)
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
) -> tuple[list[bytes], list[bytes], str]:
    """The records of one page, and the lines of ``left.py``'s artifact for what a rule skipped."""
    result.resource_version = result.resource_version or (page.get("metadata") or {}).get("resourceVersion")
    result.consistent = result.consistent and not page.get("inconsistent")
    lines, left_lines = [], []
    for item in page.get("items") or []:
        meta = item.get("metadata") or {}
        if t.namespaced and not run.filters.namespace_selected(meta.get("namespace", "")):
            continue
        if keep is not None and not keep(item):
            continue
        reason = rule(item) if rule and run.filters.default_skips else None
        if reason:
            result.skipped[reason] = result.skipped.get(reason, 0) + 1
            line = left.record_line(item, t, reason)
            if line is not None:
                left_lines.append(line)
                result.left += 1
            continue
        key = object_key(item)
        result.ordered = result.ordered and key >= last
        last = key
        lines.append(dumps(to_record(item, t)) + b"\n")
        result.count += 1
        if t.namespaced:
            result.namespaces.add(meta["namespace"])
    return lines, left_lines, last
