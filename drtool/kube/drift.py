"""What the GitOps controllers changed once a release step let them reconcile: the drift report.

A restore writes the backup's objects with Argo CD Applications and Flux Kustomizations/HelmReleases held
(``holds``); the release step lets them sync again, and they make the cluster what Git says, which may not be
what the backup held (Git moved on since the backup, or the backup caught a hand-made change). A team wants
that listed, not discovered later. So when the release step releases a GitOps app and its ``drift`` option is
set, it reads the restored objects first (the backup's types, in the backup's namespaces), releases, waits
until every released app reports a reconcile since the release (at most ``drift`` seconds), reads them again,
and reports each object the controllers created or deleted and each field they changed, with the manager
that owns the new value (``kustomize-controller``, ``argocd-controller``). Status, and what drtool's own
release wrote, are not drift. Types the backup does not hold are not read: an object of a kind the backup
never had is not listed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .artifacts import records, types_in
from .client import KubeClient
from .discovery import ResourceType
from .fields import managers
from .holds import RELEASE_MANAGER, read_key, release_patch
from .judge import ADDED, DRIFT, judge
from .objects import comparable_from_live, object_key, target_key

Obj = dict[str, Any]
# (API group, kind) of the GitOps apps whose release starts a reconcile worth a drift report
GITOPS: frozenset[tuple[str, str]] = frozenset(
    {
        ("argoproj.io", "Application"),
        ("kustomize.toolkit.fluxcd.io", "Kustomization"),
        ("helm.toolkit.fluxcd.io", "HelmRelease"),
    }
)
POLL = 1.0
MAX_LINES = 50


def is_gitops(t: ResourceType) -> bool:
    return (t.group, t.kind) in GITOPS


class Snapshot:
    """The target's objects of the backup's types: namespaced ones in the backup's (target) namespaces,
    cluster-scoped ones the backup names. ``objects``: (type key, object key) -> the object as read."""

    def __init__(self, client: KubeClient, scope: Mapping[ResourceType, set[str]]) -> None:
        self.objects: dict[tuple[str, str], tuple[ResourceType, Obj]] = {}
        for t, keys in scope.items():
            for item in _read(client, t, keys):
                self.objects[(t.key, object_key(item))] = (t, item)


def scope_of(ctx: Any, ns_map: Mapping[str, str]) -> dict[ResourceType, set[str]]:
    """Per type of the backup, the target keys of its objects (after the namespace map)."""
    return {t: {target_key(r["object"], t, ns_map) for r in records(ctx, t)} for t in types_in(ctx)}


def _read(client: KubeClient, t: ResourceType, keys: set[str]) -> Iterable[Obj]:
    if t.namespaced:
        for ns in sorted({k.split("/", 1)[0] for k in keys}):
            for page in client.list_pages(t.path(ns)):
                yield from page.get("items") or []
        return
    for name in sorted(keys):
        item = read_key(client, t, name)
        if item is not None:
            yield item


def reconciled(app: Obj, since: datetime) -> bool:
    """Whether a GitOps app reports a reconcile that finished after ``since``: a Flux object has observed its
    current generation (the release changed its spec) and says Ready True or False; an Argo CD Application
    was reconciled (``status.reconciledAt``) at or after ``since`` and has no sync operation requested or
    running. Argo CD writes ``reconciledAt`` in the same update that requests an automated sync
    (``operation``), before its operation processor starts it (argo-cd v3.6.2, found with the real
    controller: tests/plugins/test_argocd_holds.py), so a requested operation is not a result yet."""
    status = app.get("status") or {}
    if app.get("kind") == "Application":
        at = status.get("reconciledAt")
        running = (status.get("operationState") or {}).get("phase") == "Running" or bool(app.get("operation"))
        return bool(at) and _time(at) >= since.replace(microsecond=0) and not running
    generation = (app.get("metadata") or {}).get("generation")
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    observed = status.get("observedGeneration") == generation
    return observed and any(c.get("status") in ("True", "False") for c in ready)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def wait_reconciled(
    client: KubeClient, apps: list[tuple[ResourceType, str]], since: datetime, seconds: float
) -> list[str]:
    """Wait until every released app (type, target key) reports a reconcile since ``since``; the ones that did
    not within ``seconds``."""
    deadline = time.monotonic() + seconds
    waiting = list(apps)
    while True:
        left = []
        for t, key in waiting:
            live = read_key(client, t, key)
            if live is not None and not reconciled(live, since):  # one deleted meanwhile: nothing to wait for
                left.append((t, key))
        waiting = left
        if not waiting or time.monotonic() >= deadline:
            return [f"{t.kind} {key}" for t, key in waiting]
        time.sleep(POLL)


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Objects created or deleted between the two reads (or being deleted: a prune whose finalizers have not
    run yet, as Argo CD's foreground deletes leave until the garbage collector ends them), and each field
    changed or added in between by a manager other than drtool's release (status aside), with the manager
    that owns the new value."""
    lines = []
    for key in sorted(set(before.objects) | set(after.objects)):
        t, was = before.objects.get(key) or after.objects[key]
        label = f"{t.kind} {key[1]}"
        if key not in after.objects:
            lines.append(f"{label}: deleted")
            continue
        now = after.objects[key][1]
        deleting = (now.get("metadata") or {}).get("deletionTimestamp")
        if deleting and not (was.get("metadata") or {}).get("deletionTimestamp"):
            finalizers = ", ".join((now.get("metadata") or {}).get("finalizers") or [])
            lines.append(f"{label}: being deleted (finalizers: {finalizers})")
            continue
        if key not in before.objects:
            who = sorted({m.name for m in managers(now)}) or ["(no manager)"]
            lines.append(f"{label}: created by {', '.join(who)}")
            continue
        released = comparable_from_live(_as_released(was), t, False)
        judged = judge(label, released, comparable_from_live(now, t, False), now)
        for change in judged.changes:
            if change.kind in (DRIFT, ADDED) and RELEASE_MANAGER not in change.manager_names():
                lines.append(f"{label}: {change.line()}")
    return lines[:MAX_LINES] + ([f"(+{len(lines) - MAX_LINES} more)"] if len(lines) > MAX_LINES else [])


def _as_released(obj: Obj) -> Obj:
    """``obj`` as the release step leaves it (its merge patch applied): what the release itself changes, the
    backup's values put back and the hold's annotation removed, is not drift."""
    found = release_patch(obj)
    if not found:
        return obj
    out = _merge(obj, found[0])
    if not out["metadata"].get("annotations"):
        out["metadata"].pop("annotations", None)
    return out


def _merge(target: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386): maps merge, ``None`` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def now() -> datetime:
    return datetime.now(UTC)
