"""The delta format of a Kubernetes chain (``drtool follow -p kubernetes``) and reading deltas back.

A delta is one artifact, ``DELTAS``: a header line (the types its events name, as ``ResourceType.meta``, so a
reader needs no discovery), then one JSON line per event in the order the follower saw them:
``{"op": "put"|"del", "type": "deployments.apps", "key": "ns/name", "uid", "rv", "at", "record"}``. ``rv``
is the object's resourceVersion in the source (for a deletion, the one of the deleted object), ``at`` when
the follower saw it (RFC 3339 UTC: what ``--at TIME`` and a standby's ``delete_after`` compare), and
``record`` a put's object as a full backup records it (``objects.to_record``). A ``sync`` event follows a
relist (the watch's position was compacted away, 410 Gone, or the type is new): the relist wrote every
object as a put, and the sync's ``keys`` name all the type holds then, so whatever else it held is gone.
The artifact is sensitive: Secrets travel in it, encrypted like every artifact, and are never logged.

Replaying deltas onto a full (``Changes`` then ``merged``) keeps the last event of each object up to the
point asked for, then streams each type's full records with those changes merged in key order, so a
point-in-time view or a fold reads like a full backup and holds only the deltas' changes in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from drtool.errors import IntegrityError
from drtool.plugin.contract import RestoreContext
from drtool.points import Point, parse_time

from .artifacts import checked, ndjson
from .discovery import ResourceType
from .objects import dumps, object_key

DELTAS = "deltas.ndjson"
FORMAT = "drtool-kube-deltas-v1"
PUT, DEL, SYNC = "put", "del", "sync"

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Event:
    """One change the follower saw: a put (created or updated, ``record`` set), a deletion, or a sync (``keys``:
    everything the type held after a relist)."""

    op: str
    type: str
    key: str
    uid: str
    rv: str
    at: str
    record: Obj | None = None
    keys: tuple[str, ...] | None = None

    def line(self) -> bytes:
        out: Obj = {"op": self.op, "type": self.type, "key": self.key, "uid": self.uid, "rv": self.rv, "at": self.at}
        if self.record is not None:
            out["record"] = self.record
        if self.keys is not None:
            out["keys"] = list(self.keys)
        return dumps(out) + b"\n"

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Event:
        try:
            event = cls(
                op=str(raw["op"]),
                type=str(raw["type"]),
                key=str(raw["key"]),
                uid=str(raw.get("uid") or ""),
                rv=str(raw.get("rv") or ""),
                at=str(raw["at"]),
                record=raw.get("record"),
                keys=tuple(str(k) for k in raw["keys"]) if raw.get("keys") is not None else None,
            )
        except (KeyError, TypeError) as exc:
            raise IntegrityError(f"kubernetes delta: malformed event ({exc})") from None
        if (
            event.op not in (PUT, DEL, SYNC)
            or (event.op == PUT) != isinstance(event.record, dict)
            or (event.op == SYNC) != (event.keys is not None)
        ):
            raise IntegrityError(f"kubernetes delta: malformed event for {event.type} {event.key}")
        return event

    def position(self) -> int:
        """The resourceVersion as a chain position (etcd revisions, numeric in every API server drtool knows)."""
        return int(self.rv) if self.rv.isdigit() else 0


def header(types: Mapping[str, ResourceType], events: int, first: int, last: int) -> bytes:
    meta = {key: t.meta() for key, t in sorted(types.items())}
    return dumps({"format": FORMAT, "types": meta, "events": events, "first": first, "last": last}) + b"\n"


def is_delta(ctx: RestoreContext) -> bool:
    """Whether ``ctx`` is a delta link of a Kubernetes chain (a full holds one artifact per type instead)."""
    return any(a.name == DELTAS and a.meta.get("format") == FORMAT for a in ctx.artifacts)


def read_delta(ctx: RestoreContext) -> tuple[dict[str, ResourceType], Iterator[Event]]:
    """The types a delta names and its events in order (the artifact is verified as it is read to its end)."""
    lines = ndjson(ctx, DELTAS)
    head = next(lines, None)
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise IntegrityError(f"kubernetes delta {ctx.backup_id}: no {FORMAT} header")
    types = {key: ResourceType.from_meta(dict(meta)) for key, meta in (head.get("types") or {}).items()}

    def events() -> Iterator[Event]:
        for raw in lines:
            event = Event.parse(raw)
            if event.type not in types:
                raise IntegrityError(f"kubernetes delta {ctx.backup_id}: event of undeclared type {event.type}")
            if event.record is not None:
                checked(event.record, types[event.type])
            yield event

    return types, events()


def reaches(event: Event, point: Point) -> bool:
    """Whether ``event`` happened at or before ``point``."""
    if point.position is not None:
        return event.position() <= point.position
    if point.time is not None:
        return parse_time(event.at) <= point.time
    return True


@dataclasses.dataclass
class Changes:
    """The net effect of a chain's deltas up to a point: the last event of every object they touch."""

    types: dict[str, ResourceType] = dataclasses.field(default_factory=dict)
    last: dict[str, dict[str, Event]] = dataclasses.field(default_factory=dict)  # type -> key -> event
    synced: dict[str, set[str]] = dataclasses.field(default_factory=dict)  # type -> keys of its last sync
    events: int = 0
    last_at: str | None = None
    last_rv: int = 0

    def add(self, event: Event) -> None:
        last = self.last.setdefault(event.type, {})
        if event.keys is not None:  # a relist: what the type does not hold any more is gone
            keep = set(event.keys)
            self.synced[event.type] = keep
            for key, before in list(last.items()):
                if key not in keep:
                    last[key] = dataclasses.replace(before, op=DEL, record=None)
        else:
            last[event.key] = event
        self.events += 1
        self.last_at = event.at
        self.last_rv = max(self.last_rv, event.position())


def read_changes(deltas: Sequence[RestoreContext], point: Point | None) -> Changes:
    """Every delta read to its end (so each is verified whole), keeping the events up to ``point``."""
    out = Changes()
    for ctx in deltas:
        types, events = read_delta(ctx)
        for event in events:
            if point is None or reaches(event, point):
                out.types.setdefault(event.type, types[event.type])
                out.add(event)
    return out


def merged(full: Iterator[Obj], changes: Mapping[str, Event], synced: set[str] | None = None) -> Iterator[Obj]:
    """A type's records as of the point: the full's (in key order), each replaced or dropped by its last
    change (or dropped when a relist, ``synced``, no longer named it), with the objects the deltas created
    merged in key order."""
    puts = sorted((key, e.record) for key, e in changes.items() if e.op == PUT and e.record is not None)
    done: set[str] = set()
    i = 0
    for rec in full:
        key = object_key(rec["object"])
        while i < len(puts) and puts[i][0] < key:
            yield puts[i][1]
            done.add(puts[i][0])
            i += 1
        change = changes.get(key)
        if change is None:
            if synced is None or key in synced:
                yield rec
        elif change.record is not None and key not in done:  # (a full listed out of order: once only)
            yield change.record
            done.add(key)
    yield from (record for key, record in puts[i:] if key not in done)
