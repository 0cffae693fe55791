"""A warm standby kept hydrated from a Kubernetes chain: ``StandbySupport`` for the kubernetes and kueue plugins.

``hydrate`` applies one link of a chain (follow.py writes them) to a live cluster that never talks to the
source (docs/plugins.md, "standby"):
- The link is read to its end first (the store verifies it), then reduced to the last change of each object
  (deltas.Changes: a watch's events of different types arrive in any order), and applied level by level
  (order.py: namespaces before what lives in them, CRDs before their objects), owners before dependents.
- Every object is written by server-side apply, held (holds.STANDBY_RULES: Deployments and StatefulSets at
  zero replicas, Jobs, CronJobs, TrainJobs, RayJobs suspended, GitOps sync off; the originals in the
  object's ``drtool.dev/held`` annotation and in ``state.held``), with owner references pointing at the
  standby's own uids (``state.objects`` maps them across links).
- Idempotent: an object whose source resourceVersion the state already records is skipped, and applying
  the same body again is a no-op for the API server (its resourceVersion stays), so a link applied twice,
  or again after a kill mid-apply, changes and duplicates nothing (objects are addressed by name).
- Deletions are deferred (``state.deferred``, with the time they happened in the source) and applied by
  ``settle`` once older than ``delete_after``, each guarded by the uid the standby gave the object: an
  object recreated meanwhile is never deleted by an old deletion.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import Deferral, Hydrated, RestoreContext, StandbyOptions, StandbyState, Tracked
from drtool.points import parse_time

from .artifacts import records, types_in
from .client import APPLY_PATCH, FIELD_MANAGER, ApiError, KubeClient
from .crds import wait_established
from .deltas import DEL, PUT, SYNC, Changes, Event, is_delta, read_delta
from .discovery import CRDS, ResourceType
from .holds import HELD, MERGE, RELEASE_MANAGER, STANDBY_RULES, hold, release_patch
from .objects import body_for_apply, digest, dumps, object_key
from .order import level_of
from .settings import Connection

Obj = dict[str, Any]
CRD_TIMEOUT = 60.0
FULL = "*"  # in ``Changes.synced``: the link is a full, and names every type the standby should hold


def object_id(t: ResourceType, key: str) -> str:
    """How the state names an object: ``deployments.apps/v1 team/web`` (type, version, namespace/name), enough
    to address it in the standby without discovery."""
    return f"{t.key}/{t.version} {key}"


def parse_id(oid: str) -> tuple[ResourceType, str, str | None]:
    """The type (as far as its path needs), name and namespace of an ``object_id``."""
    kind_part, _, key = oid.partition(" ")
    type_key, _, version = kind_part.rpartition("/")
    resource, _, group = type_key.partition(".")
    namespace, _, name = key.rpartition("/")
    t = ResourceType(group=group, version=version, resource=resource, kind="", namespaced=bool(namespace))
    return t, name, namespace or None


@dataclasses.dataclass
class _Run:
    client: KubeClient
    state: StandbyState
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    failed: list[str] = dataclasses.field(default_factory=list)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def outcome(self) -> Hydrated:
        return Hydrated(
            state=self.state,
            created=self.counts.get("created", 0),
            updated=self.counts.get("updated", 0),
            unchanged=self.counts.get("unchanged", 0),
            deleted=self.counts.get("deleted", 0),
            deferred=len(self.state.deferred),
            held=len(self.state.held),
            released=self.counts.get("released", 0),
            failed=tuple(self.failed),
        )


def _client(target: Mapping[str, Any]) -> KubeClient:
    return KubeClient(Connection.from_mapping(target))


def _copy(state: StandbyState) -> StandbyState:
    """The state a call changes: a copy, so a call that raises leaves the caller's as it was."""
    return StandbyState.from_json(json.loads(json.dumps(state.to_json())))


def hydrate(ctx: RestoreContext, target: Mapping[str, Any], state: StandbyState, options: StandbyOptions) -> Hydrated:
    changes = _link_changes(ctx)  # the whole link read (and verified) before anything is written
    run = _Run(_client(target), _copy(state))
    _apply_puts(run, changes)
    _defer_deletions(run, changes)
    _settle(run, options)
    return run.outcome()


def settle(target: Mapping[str, Any], state: StandbyState, options: StandbyOptions) -> Hydrated:
    run = _Run(_client(target), _copy(state))
    _settle(run, options)
    return run.outcome()


def release(target: Mapping[str, Any], state: StandbyState) -> Hydrated:
    """Put back what ``state.held`` holds, level by level (what others depend on first); a held object that
    is gone from the standby is dropped from the state, a completed Job's record stays held."""
    run = _Run(_client(target), _copy(state))
    for oid in sorted(run.state.held, key=lambda o: (level_of(parse_id(o)[0]), o)):
        t, name, ns = parse_id(oid)
        try:
            live = run.client.get(t.path(ns, name))
        except ApiError as exc:
            if exc.status != 404:
                run.failed.append(f"{oid}: {exc.status} {exc.reason}")
                continue
            run.state.held.pop(oid)
            continue
        found = release_patch(live)
        if found is not None:
            params = {"fieldManager": RELEASE_MANAGER}
            try:
                run.client.request("PATCH", t.path(ns, name), params=params, body=dumps(found[0]), content_type=MERGE)
            except ApiError as exc:
                run.failed.append(f"{oid}: {exc.status} {exc.reason}")
                continue
            run.count("released")
        run.state.held.pop(oid)
    return run.outcome()


# --- reading a link --------------------------------------------------------------------------------


def _link_changes(ctx: RestoreContext) -> Changes:
    """A delta's net changes; a full as a put of each object and a sync per type (it replaces the standby)."""
    out = Changes()
    if is_delta(ctx):
        types, events = read_delta(ctx)
        for event in events:
            out.types.setdefault(event.type, types[event.type])
            out.add(event)
        return out
    at = str(ctx.plugin_meta.get("finished") or ctx.created)
    for t in types_in(ctx):
        out.types[t.key] = t
        keys = []
        for rec in records(ctx, t):
            key = object_key(rec["object"])
            keys.append(key)
            rv = str(rec["object"].get("metadata", {}).get("resourceVersion") or "")
            out.add(Event(PUT, t.key, key, str(rec.get("uid") or ""), rv, at, rec))
        out.add(Event(SYNC, t.key, "", "", "", at, keys=tuple(keys)))
    out.synced[FULL] = set(out.types)  # a full names every type it holds: tracked objects of others are gone
    return out


# --- applying puts ---------------------------------------------------------------------------------


def _apply_puts(run: _Run, changes: Changes) -> None:
    """Every put, level by level; an object whose owner this link brings waits for it (a few rounds)."""
    puts = [(changes.types[tk], e) for tk, last in changes.last.items() for e in last.values() if e.op == PUT]
    levels: dict[int, list[tuple[ResourceType, Event]]] = {}
    for t, e in puts:
        levels.setdefault(level_of(t), []).append((t, e))
    waiting: list[tuple[ResourceType, Event]] = []
    owner_uids = {e.uid for _, e in puts}
    for level in sorted(levels):
        pending = sorted(waiting + levels[level], key=lambda p: (p[0].key, p[1].key))
        while pending:
            left = [p for p in pending if not _apply_one(run, *p, owner_uids, final=False)]
            if len(left) == len(pending):
                break
            pending = left
        waiting = pending
        if any(t.key == CRDS for t, _ in levels[level]):
            crds = [t for t in changes.types.values() if t.crd]
            if crds:
                wait_established(run.client, _Wait(), crds)
    for t, e in waiting:
        _apply_one(run, t, e, owner_uids, final=True)


@dataclasses.dataclass(frozen=True)
class _Wait:
    crd_timeout: float = CRD_TIMEOUT


def _apply_one(run: _Run, t: ResourceType, e: Event, owner_uids: set[str], final: bool) -> bool:
    """Apply one put held; False when it must wait for an owner this link brings (``final``: drop that
    reference instead: a stale uid would make the standby's garbage collector delete the object)."""
    oid = object_id(t, e.key)
    known = run.state.objects.get(oid)
    run.state.deferred.pop(oid, None)  # written again in the source: no longer to be deleted
    version = e.rv or digest(e.record or {})
    if known is not None and known.source_uid == e.uid and known.version == version:
        run.count("unchanged")
        return True
    record = json.loads(json.dumps(e.record))
    targets = {o.source_uid: o.target_uid for o in run.state.objects.values()}
    refs = []
    for ref in record.get("owners") or []:
        new = targets.get(ref.get("uid", ""))
        if new is None and ref.get("uid") in owner_uids and not final:
            return False
        if new is not None:
            refs.append({**ref, "uid": new})
    body = _held(record, t)
    if refs:
        body["metadata"]["ownerReferences"] = refs
    meta = body["metadata"]
    try:
        live = _apply(run, t, body)
    except ApiError as exc:
        run.failed.append(f"{oid}: {exc.status} {exc.reason}: {exc.message.rsplit(': ', 1)[-1]}")
        return True
    live_meta = live["metadata"]
    run.state.objects[oid] = Tracked(e.uid, str(live_meta["uid"]), version, str(live_meta["resourceVersion"]))
    held = (meta.get("annotations") or {}).get(HELD)
    if held:
        run.state.held[oid] = json.loads(held)
    else:
        run.state.held.pop(oid, None)
    if known is None:
        run.count("created")
    else:
        run.count("unchanged" if known.target_version == live_meta["resourceVersion"] else "updated")
    return True


def _apply(run: _Run, t: ResourceType, body: Obj) -> Obj:
    """Server-side apply ``body``; into a namespace the standby lacks, after creating it bare. No link brings
    a namespace created after the full when the chain does not follow Namespaces (``-p kueue``, a filtered
    ``-p kubernetes``): a restore creates such a namespace too. It is not tracked, so never deleted."""
    meta = body["metadata"]
    params = {"fieldManager": FIELD_MANAGER, "force": "true"}
    path = t.path(meta.get("namespace"), meta["name"])
    try:
        return run.client.request("PATCH", path, params=params, body=dumps(body), content_type=APPLY_PATCH).json()
    except ApiError as exc:
        if exc.status != 404 or f'namespaces "{meta.get("namespace")}" not found' not in exc.message:
            raise
    bare = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": meta["namespace"]}}
    try:
        run.client.request("POST", "/api/v1/namespaces", body=dumps(bare))
    except ApiError as exc:
        if exc.status != 409:  # created meanwhile: as good
            raise
    return run.client.request("PATCH", path, params=params, body=dumps(body), content_type=APPLY_PATCH).json()


def _held(record: Obj, t: ResourceType) -> Obj:
    """The object as the standby holds it: portable fields only, in its held form (never running)."""
    hold(record, t, STANDBY_RULES)
    return body_for_apply(record, t)


# --- deletions -------------------------------------------------------------------------------------


def _defer_deletions(run: _Run, changes: Changes) -> None:
    """Deletions, and what a sync (or a full) no longer names, become deferrals with their source time."""
    seen = changes.last_at or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    whole = changes.synced.get(FULL)
    for oid, tracked in list(run.state.objects.items()):
        kind_part, _, key = oid.partition(" ")
        type_key = kind_part.rpartition("/")[0]
        event = changes.last.get(type_key, {}).get(key)
        synced = set() if whole is not None and type_key not in whole else changes.synced.get(type_key)
        if event is not None and event.op == DEL:
            run.state.deferred.setdefault(oid, Deferral(event.uid or tracked.source_uid, event.at))
        elif event is None and synced is not None and key not in synced:
            run.state.deferred.setdefault(oid, Deferral(tracked.source_uid, seen))


def _settle(run: _Run, options: StandbyOptions) -> None:
    now = parse_time(options.now) if options.now else dt.datetime.now(dt.UTC)
    for oid, deferral in list(run.state.deferred.items()):
        if (now - parse_time(deferral.seen)).total_seconds() < options.delete_after:
            continue
        tracked = run.state.objects.get(oid)
        if tracked is not None and not _delete(run, oid, tracked.target_uid):
            continue  # refused: stays deferred, reported
        run.state.deferred.pop(oid, None)
        run.state.objects.pop(oid, None)
        run.state.held.pop(oid, None)


def _delete(run: _Run, oid: str, target_uid: str) -> bool:
    """Delete the standby's object if it is still the one the chain brought (uid precondition); False when
    the API server refused (then it stays deferred)."""
    t, name, ns = parse_id(oid)
    body = dumps({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": target_uid}})
    try:
        run.client.request("DELETE", t.path(ns, name), body=body, ok=(200, 202))
    except ApiError as exc:
        if exc.status in (404, 409):  # gone already, or another object by that name now: not ours to delete
            return True
        run.failed.append(f"{oid}: {exc.status} {exc.reason}")
        return False
    run.count("deleted")
    return True
