"""Writing one object into the target: a create or server-side apply, owners remapped, status through /status.

An object the target does not hold (``Existing`` listed its type and did not find it) is created with a
``POST`` (field manager ``drtool``): server-side apply of a new object cost the API server 44-55 % more CPU
and etcd 61-73 % more than a create of the same object (20,000 objects, docs/performance.md, "Restores near
the API server's limit"), and a restore into an empty cluster writes nothing else. A create that finds the
object there after all (409: created meanwhile) falls back to apply. Server-side apply (``PATCH`` with
``application/apply-patch+yaml``, field manager ``drtool``, ``force``) updates an existing object, and an
apply that changes nothing writes nothing: the object's resourceVersion stays the same, which is how a
rerun reports "unchanged". (A created object's fields are owned by ``drtool`` through an update, not an
apply: a later restore's apply of a version without some field takes ownership of the rest but leaves that
field; ``existing: replace`` makes such an object equal to the backup.)
An object the target already holds in the backup's exact form is not even sent (``Existing`` knows a
digest of each). Apply never removes fields that another field manager owns (``existing: update``);
with ``existing: replace`` an object that still differs after it is replaced (``PUT``), so that every
object ends equal to the backup's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .client import APPLY_PATCH, FIELD_MANAGER, ApiError, KubeClient
from .discovery import ResourceType
from .holds import hold
from .installed import kept
from .objects import apply_form, body_for_apply, comparable_from_live, digest, dumps, object_key
from .transforms import Rewrite

Obj = dict[str, Any]
DEFER = "defer"
SHAPED = "shaped"  # a record key: its object is in the form written to the target (held, transformed)
_UNKNOWN = object()


class Existing:
    """What the target already holds of each type: key -> (resourceVersion, uid, digest of ``apply_form``).

    One paged LIST per type, reduced to those three values, so a rerun finds objects that already equal
    the backup without a request per object (and without holding the target's objects in memory)."""

    def __init__(self, client: KubeClient, page_size: int = 500) -> None:
        self.client, self.page_size = client, page_size
        self._by_type: dict[str, dict[str, tuple[str, str, str]] | None] = {}
        self._lock = threading.Lock()

    def of(self, t: ResourceType) -> dict[str, tuple[str, str, str]] | None:
        """None when the target does not serve the type (yet)."""
        known = self._by_type.get(t.key, _UNKNOWN)  # fast path without the lock (dict reads are atomic)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        with self._lock:
            if t.key not in self._by_type:
                self._by_type[t.key] = self._load(t)
            return self._by_type[t.key]

    def forget(self, t: ResourceType) -> None:
        with self._lock:
            self._by_type.pop(t.key, None)

    def _load(self, t: ResourceType) -> dict[str, tuple[str, str, str]] | None:
        found: dict[str, tuple[str, str, str]] = {}
        try:
            for page in self.client.list_pages(t.path(), limit=self.page_size):
                for item in page.get("items") or []:
                    meta = item["metadata"]
                    found[object_key(item)] = (meta["resourceVersion"], meta["uid"], digest(apply_form(item, t)))
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:  # may write but not list: apply decides; outcomes then read "created"
                return {}
            raise
        return found


class Owners:
    """Old uid -> new uid for every restored object that something else names as its owner."""

    def __init__(self, existing: Existing, types: list[ResourceType], backup_uids: set[str], owner_uids: set[str]):
        self.existing = existing
        self.types = {(t.group, t.kind): t for t in types}
        self.backup_uids, self.owner_uids = backup_uids, owner_uids
        self.new: dict[str, str] = {}
        self.dropped: list[str] = []
        self._lock = threading.Lock()

    def record(self, old: str | None, new: str | None) -> None:
        if old and new and old in self.owner_uids:
            with self._lock:
                self.new[old] = new

    def in_target(self, ref: Obj, namespace: str | None) -> str | None:
        """The uid of the object ``ref`` names (by kind and name) if the target already holds it."""
        group = ref.get("apiVersion", "").rpartition("/")[0]
        t = self.types.get((group, ref.get("kind", "")))
        if t is None:
            return None
        key = f"{namespace}/{ref.get('name')}" if t.namespaced else ref.get("name", "")
        found = (self.existing.of(t) or {}).get(key)
        return found[1] if found else None

    def remap(
        self, owners: list[Obj], namespace: str | None, final: bool, who: str, quiet: bool = False
    ) -> list[Obj] | str:
        """The owner references with new uids, or DEFER while an owner from the backup is not restored
        yet. On the ``final`` attempt an owner that never appeared is dropped (and reported): a stale uid
        would make the garbage collector delete the object."""
        out = []
        for ref in owners:
            new = self.new.get(ref.get("uid", "")) or self.in_target(ref, namespace)
            if new is None and ref.get("uid") in self.backup_uids and not final:
                return DEFER
            if new is None:
                if not quiet:
                    with self._lock:
                        self.dropped.append(f"{who} -> {ref.get('kind')}/{ref.get('name')}")
                continue
            out.append({**ref, "uid": new})
        return out


class Applier:
    """Applies records of one restore; ``apply`` returns created|changed|unchanged|skipped|kept|defer.

    ``kept``: an admission webhook configuration or aggregated API the target's own platform install
    registered, left as it is (``installed.py``)."""

    def __init__(self, client: KubeClient, opts: Any, existing: Existing, owners: Owners) -> None:
        self.client, self.opts, self.existing, self.owners = client, opts, existing, owners
        self.rewrites: list[Rewrite] = []  # what the plan's transforms rewrote (list.append is atomic)
        self.held: set[str] = set()  # what was restored held (drtool.kube.holds)

    def prepare(self, record: Obj, t: ResourceType, final: bool, quiet: bool = False) -> Obj | str:
        # once per record: one waiting for its owner is prepared again, and a swap (a -> b, b -> a) of the
        # transforms must not undo itself
        found: list[Rewrite] = []
        if not record.get(SHAPED):
            if self.opts.hold and hold(record, t):
                self.held.add(f"{t.kind} {object_key(record['object'])}")
            self.opts.transforms.apply(body_for_apply(record, t), t, found)
            record[SHAPED] = True
        body = record["object"]
        if record.get("owners"):
            ns = body["metadata"].get("namespace")
            refs = self.owners.remap(record["owners"], ns, final, f"{t.key} {object_key(body)}", quiet)
            if refs == DEFER:
                return DEFER
            if refs:
                body["metadata"]["ownerReferences"] = refs
        self.rewrites.extend(found)
        return body

    def apply(self, record: Obj, t: ResourceType, final: bool = False) -> str:
        body = self.prepare(record, t, final)
        if isinstance(body, str):
            return body
        before = (self.existing.of(t) or {}).get(object_key(body))
        if before is not None and kept(t, self.opts.webhooks):
            self.owners.record(record.get("uid"), before[1])
            return "kept"
        if before is not None and (self.opts.existing == "skip" or before[2] == digest(apply_form(body, t))):
            self.owners.record(record.get("uid"), before[1])
            return "skipped" if self.opts.existing == "skip" else "unchanged"
        known = before is None and self.existing.of(t) is not None  # listed, and not there
        live = (self.create(t, body) if known else None) or self.ssa(t, body)
        if before is not None and self.opts.existing == "replace" and _differ(live, body, t):
            live = self.replace(t, body, live["metadata"]["resourceVersion"])
        meta = live["metadata"]
        self.owners.record(record.get("uid"), meta["uid"])
        outcome = "created" if before is None else ("changed" if meta["resourceVersion"] != before[0] else "unchanged")
        if before is None and self._wants_status(record, t):
            self.ssa(t, _status_body(body, record["status"]), sub="status")
        return outcome

    def _wants_status(self, record: Obj, t: ResourceType) -> bool:
        """Status is written for custom resources this restore created, through /status where the type has it.

        An object that already existed keeps the status its controller wrote: re-applying the backup's
        would fight the controller and make every rerun a change. A built-in object's status is never
        written: its controller computes it in the new cluster, and the old cluster's copy would make a
        Deployment look Available, or a Job Complete, before anything ran there."""
        return bool(self.opts.restore_status and t.crd and t.status and record.get("status"))

    def ssa(self, t: ResourceType, body: Obj, sub: str | None = None, dry_run: bool = False) -> Obj:
        meta = body["metadata"]
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        path = t.path(meta.get("namespace"), meta["name"], sub)
        return self.client.request("PATCH", path, params=params, body=dumps(body), content_type=APPLY_PATCH).json()

    def create(self, t: ResourceType, body: Obj) -> Obj | None:
        """``POST`` a new object; None when it exists after all (then it is applied)."""
        meta = body["metadata"]
        params = {"fieldManager": FIELD_MANAGER}
        try:
            return self.client.request("POST", t.path(meta.get("namespace")), params=params, body=dumps(body)).json()
        except ApiError as exc:
            if exc.status == 409:
                return None
            raise

    def differs(self, record: Obj, t: ResourceType) -> bool:
        """Whether an object of the backup exists in the target with different content (existing=fail)."""
        body = self.prepare(record, t, final=True, quiet=True)
        assert not isinstance(body, str)
        before = (self.existing.of(t) or {}).get(object_key(body))
        return before is not None and not kept(t, self.opts.webhooks) and before[2] != digest(apply_form(body, t))

    def replace(self, t: ResourceType, body: Obj, resource_version: str) -> Obj:
        """PUT the backup's object over an existing one whose other fields (owned by another field manager,
        which apply leaves alone) still make it differ: ``existing: replace`` means "make it the backup's"."""
        meta = body["metadata"]
        full = {**body, "metadata": {**meta, "resourceVersion": resource_version}}
        path = t.path(meta.get("namespace"), meta["name"])
        params = {"fieldManager": FIELD_MANAGER}
        return self.client.request("PUT", path, params=params, body=dumps(full)).json()

    def classify(self, record: Obj, t: ResourceType) -> str:
        """Dry run: what applying would do — create, change or unchanged — using the server's dryRun=All."""
        body = self.prepare(record, t, final=True)
        assert not isinstance(body, str)
        existing = self.existing.of(t)
        if existing is None:
            return "create"  # the type itself arrives with a CRD in this restore
        before = existing.get(object_key(body))
        if before is not None and (kept(t, self.opts.webhooks) or before[2] == digest(apply_form(body, t))):
            return "unchanged"
        try:
            after = self.ssa(t, body, dry_run=True)
        except ApiError as exc:
            if exc.status == 404 and exc.details.get("kind") == "namespaces":
                return "create"  # its namespace is created by this restore
            raise
        if object_key(body) not in existing:
            return "create"
        meta = body["metadata"]
        live = self.client.get(t.path(meta.get("namespace"), meta["name"]))
        same = comparable_from_live(after, t, False) == comparable_from_live(live, t, False)
        return "unchanged" if same else "change"


def _differ(live: Obj, body: Obj, t: ResourceType) -> bool:
    return digest(apply_form(live, t)) != digest(apply_form(body, t))


def _status_body(body: Mapping[str, Any], status: Any) -> Obj:
    meta = {k: v for k, v in body["metadata"].items() if k in ("name", "namespace")}
    return {"apiVersion": body["apiVersion"], "kind": body["kind"], "metadata": meta, "status": status}
