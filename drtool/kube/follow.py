"""Continuous backup of an API server (``drtool follow -p kubernetes``, ``-p kueue``): a full, then deltas.

The loop (docs/kubernetes.md, "Continuous backup"):
- Resume or start. The chain's tip records, per watched type, the resourceVersion its watch had reached
  (``positions``); a new chain (a full backup) starts when there is no tip, or the tip is of another
  cluster (the ``kube-system`` namespace's uid differs). A full notes each type's resourceVersion with a
  one-item LIST *before* it lists, and the watches start there: nothing is missed, and what the full holds
  already arrives again and is replayed harmlessly (a put of the same object).
- One watch per type (``allowWatchBookmarks``), each on its own thread and connection, feeding one queue.
  A watch the server ends is reopened from the last resourceVersion it delivered; one whose position was
  compacted away (410 Gone) relists its type and writes every object as a put and a ``sync`` naming all the
  type holds (deltas.py), so the difference is in the chain without the follower keeping an index. A type
  that appears (a CRD installed) is relisted the same way; the set of types is rediscovered every
  ``rediscover`` seconds.
- Buffer events in memory and write a delta every ``period`` seconds (counted from the oldest buffered
  event: that is the RPO) or at ``max_events``. A delta is an ordinary backup, so it exists only once
  complete, and it carries the positions of every watch as of its last event: a kill -9 loses the buffer
  only, and the next run watches again from the tip's positions (nothing lost, nothing twice).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from drtool.errors import SourceError, StoreUnavailable, UsageError
from drtool.plugin.contract import BackupContext, FollowContext, Span
from drtool.repo.manifest import utc_now

from .client import ApiError, KubeClient
from .deltas import DEL, DELTAS, FORMAT, PUT, SYNC, Event, header
from .discovery import ResourceType
from .objects import object_key, to_record

log = logging.getLogger(__name__)
Obj = dict[str, Any]

DEFAULT_PERIOD = 5.0
DEFAULT_MAX_EVENTS = 50_000
WATCH_SECONDS = 60  # the server ends each watch after this; it is reopened from where it stood
BACKOFF = (0.5, 10.0)


@dataclasses.dataclass(frozen=True)
class Watched:
    """One type to follow: which of its objects belong in the chain, and the LIST/WATCH query."""

    type: ResourceType
    keep: Callable[[Obj], bool]
    params: Mapping[str, str] = dataclasses.field(default_factory=dict)


class Scope(Protocol):
    """What differs between the plugins that follow an API server: what they watch and how a full is written."""

    def connect(self) -> KubeClient: ...

    def watched(self, client: KubeClient) -> dict[str, Watched]: ...

    def full(self, ctx: BackupContext) -> Mapping[str, Any]: ...


@dataclasses.dataclass(frozen=True)
class FollowOptions:
    period: float = DEFAULT_PERIOD
    max_events: int = DEFAULT_MAX_EVENTS
    rediscover: float = 30.0

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> FollowOptions:
        try:
            parsed = cls(
                period=float(options.get("period", DEFAULT_PERIOD)),
                max_events=int(options.get("max_events", DEFAULT_MAX_EVENTS)),
                rediscover=float(options.get("rediscover", 30.0)),
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(f"bad follow option: {exc}", "period and rediscover are seconds") from None
        if min(parsed.period, parsed.max_events, parsed.rediscover) <= 0:
            raise UsageError("follow options must be positive", "for example --period 5")
        return parsed


@dataclasses.dataclass(frozen=True)
class Item:
    """What a watch thread hands the follower: a watch event, a relist's sync, or its type going away."""

    type: str
    kind: str  # ADDED | MODIFIED | DELETED | BOOKMARK | SYNC | GONE
    rv: str
    at: str
    obj: Obj | None = None
    keys: tuple[str, ...] | None = None


class TypeWatch:
    """List-then-watch one type on a thread of its own, with its own connection (a watch holds one open)."""

    def __init__(self, scope: Scope, watched: Watched, rv: str | None, out: queue.Queue[Item]) -> None:
        self.scope, self.watched, self.rv, self.out = scope, watched, rv, out
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"drtool-watch-{watched.type.key}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        t = self.watched.type
        backoff = BACKOFF[0]
        client: KubeClient | None = None
        while not self.stop.is_set():
            try:
                client = client or self.scope.connect()
                if self.rv is None:
                    self.rv = self._relist(client)
                self._watch(client)
                backoff = BACKOFF[0]
            except ApiError as exc:
                if self.stop.is_set():
                    return
                if exc.status == 410:
                    log.info("follow: %s: position %s compacted away, relisting", t.key, self.rv)
                    self.rv = None
                    continue
                if exc.status == 404:
                    self.out.put(Item(t.key, "GONE", self.rv or "", utc_now()))
                    return
                log.warning("follow: %s: %s; retrying in %.1fs", t.key, exc.message, backoff)
            except SourceError as exc:
                if self.stop.is_set():
                    return
                log.warning("follow: %s: %s; retrying in %.1fs", t.key, exc.message, backoff)
            self.stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF[1])

    def _relist(self, client: KubeClient) -> str:
        t, keys, rv = self.watched.type, [], ""
        for page in client.list_pages(t.path(), self.watched.params):
            rv = (page.get("metadata") or {}).get("resourceVersion") or rv
            for obj in page.get("items") or []:
                if self.watched.keep(obj):
                    keys.append(object_key(obj))
                    self.out.put(Item(t.key, "ADDED", obj["metadata"].get("resourceVersion", ""), utc_now(), obj))
        self.out.put(Item(t.key, SYNC, rv, utc_now(), keys=tuple(keys)))
        return rv

    def _watch(self, client: KubeClient) -> None:
        params = {**self.watched.params, "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
        params["resourceVersion"] = self.rv or ""
        for event in client.watch(self.watched.type.path(), params, read_timeout=WATCH_SECONDS + 30):
            if self.stop.is_set():
                return
            kind, obj = str(event.get("type")), event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                raise ApiError(code, str(obj.get("reason")), f"watch {self.watched.type.key}: {obj.get('message')}")
            self.rv = str((obj.get("metadata") or {}).get("resourceVersion") or self.rv)
            self.out.put(Item(self.watched.type.key, kind, self.rv, utc_now(), obj if kind != "BOOKMARK" else None))


@dataclasses.dataclass
class Buffer:
    """Events waiting for the next delta, and where each watch stood after the last of them."""

    events: list[Event] = dataclasses.field(default_factory=list)
    started: float = 0.0  # monotonic time the oldest buffered event arrived
    first_time: str = ""
    relists: int = 0

    def add(self, event: Event) -> None:
        if not self.events:
            self.started, self.first_time = time.monotonic(), event.at
        self.events.append(event)


def cluster_id(client: KubeClient) -> str:
    """The ``kube-system`` namespace's uid: the same for the life of a cluster, different in any other one."""
    return str(client.get("/api/v1/namespaces/kube-system")["metadata"]["uid"])


class Follower:
    def __init__(self, scope: Scope, ctx: FollowContext) -> None:
        self.scope, self.ctx = scope, ctx
        self.options = FollowOptions.parse(ctx.options)
        self.tip: Any = ctx.tip()
        self.positions: dict[str, str] = dict(self.tip.meta.get("positions") or {}) if self.tip else {}
        self.types: dict[str, ResourceType] = {}
        self.keep: dict[str, Callable[[Obj], bool]] = {}
        self.watches: dict[str, TypeWatch] = {}
        self.queue: queue.Queue[Item] = queue.Queue()
        self.buffer = Buffer()
        self.cluster = ""
        self.server = ""
        self.discovered = 0.0

    def run(self) -> None:
        backoff = BACKOFF[0]
        while not self.ctx.stopping():
            try:
                client = self.scope.connect()
                self.cluster, self.server = cluster_id(client), client.server
                break
            except SourceError as exc:
                log.warning("follow: %s; retrying in %.1fs", exc.message, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF[1])
        else:
            return
        try:
            if self.tip is None or self.tip.meta.get("cluster_id") != self.cluster or not self.positions:
                self._start_chain(client)
            self._discover(client)
            while not self.ctx.stopping():
                with contextlib.suppress(queue.Empty):
                    self._take(self.queue.get(timeout=self._until_due()))
                self._flush_if_due()
                if time.monotonic() - self.discovered > self.options.rediscover:
                    with contextlib.suppress(SourceError):
                        self._discover(client)
        finally:
            for w in self.watches.values():
                w.stop.set()
            self._drain()
            self._flush(final=True)

    def _start_chain(self, client: KubeClient) -> None:
        """A full, with every watched type's resourceVersion noted before it lists (its watch starts there)."""
        watched = self.scope.watched(client)
        before = {key: _list_rv(client, w) for key, w in watched.items()}

        def write(bctx: BackupContext) -> tuple[Mapping[str, Any], Span]:
            meta = dict(self.scope.full(bctx))
            meta |= {"cluster_id": self.cluster, "positions": before, "follow": True}
            meta.setdefault("failure_domain", _api_facts(client))
            last = max((int(rv) for rv in before.values() if rv.isdigit()), default=0)
            return meta, Span(None, last, None, utc_now())

        self.tip = self.ctx.write_full(write)
        self.positions = dict(before)
        log.info("follow: full backup %s of %d type(s)", self.tip.link.backup_id, len(watched))

    def _discover(self, client: KubeClient) -> None:
        """Start a watch for every type now served (from its position, or relisted when it has none); stop
        the watches of types no longer served."""
        watched = self.scope.watched(client)
        for key, w in watched.items():
            self.types[key], self.keep[key] = w.type, w.keep
            if key not in self.watches:
                self.watches[key] = TypeWatch(self.scope, w, self.positions.get(key) or None, self.queue)
        for key in set(self.watches) - set(watched):
            self.watches.pop(key).stop.set()
        self.discovered = time.monotonic()

    def _take(self, item: Item) -> None:
        t = self.types.get(item.type)
        if t is None:
            return
        if item.kind == "GONE":
            self.watches.pop(item.type, None)
            return
        self.positions[item.type] = item.rv or self.positions.get(item.type, "")
        if item.kind == SYNC:
            self.buffer.relists += 1
            self.buffer.add(Event(SYNC, item.type, "", "", item.rv, item.at, keys=item.keys))
        elif item.obj is not None and item.kind in ("ADDED", "MODIFIED", "DELETED") and self.keep[item.type](item.obj):
            meta = item.obj.get("metadata") or {}
            uid, key = str(meta.get("uid") or ""), object_key(item.obj)
            if item.kind == "DELETED":
                self.buffer.add(Event(DEL, item.type, key, uid, item.rv, item.at))
            else:
                self.buffer.add(Event(PUT, item.type, key, uid, item.rv, item.at, to_record(item.obj, t)))
        if len(self.buffer.events) >= self.options.max_events:
            self._flush()

    def _drain(self) -> None:
        """What the watches delivered before they were told to stop goes into the last delta."""
        while True:
            try:
                self._take(self.queue.get_nowait())
            except queue.Empty:
                return

    def _until_due(self) -> float:
        if not self.buffer.events:
            return 0.5
        return min(0.5, max(0.01, self.buffer.started + self.options.period - time.monotonic()))

    def _flush_if_due(self) -> None:
        if self.buffer.events and time.monotonic() - self.buffer.started >= self.options.period:
            self._flush()

    def _flush(self, final: bool = False) -> None:
        """Write the buffer as the next delta; a store failure keeps it for the next attempt."""
        if not self.buffer.events or self.tip is None:
            return
        buffer, positions = self.buffer, dict(self.positions)
        try:
            self.tip = self.ctx.write_delta(self.tip, lambda bctx: self._write(bctx, buffer, positions))
        except StoreUnavailable as exc:
            if final:
                raise
            log.warning("follow: delta not written, keeping %d event(s): %s", len(buffer.events), exc.message)
            buffer.started = time.monotonic()
            return
        self.buffer = Buffer()
        log.info("follow: delta %s, %d event(s)", self.tip.link.backup_id, len(buffer.events))

    def _write(self, bctx: BackupContext, buffer: Buffer, positions: dict[str, str]) -> tuple[Mapping[str, Any], Span]:
        previous = int(self.tip.link.last)
        ranks = [e.position() for e in buffer.events if e.rv.isdigit()]
        first = min([previous + 1, *ranks])
        last = max([previous, *ranks])
        types = {e.type: self.types[e.type] for e in buffer.events}
        counts = {op: sum(1 for e in buffer.events if e.op == op) for op in (PUT, DEL, SYNC)}
        meta = {
            "artifact": DELTAS,
            "kind": "kube-delta",
            "server": self.server,
            "cluster_id": self.cluster,
            "positions": positions,
            "events": len(buffer.events),
            "puts": counts[PUT],
            "deletes": counts[DEL],
            "relists": counts[SYNC],
            "follows": self.tip.link.backup_id,
        }
        with bctx.artifact(DELTAS, meta={"format": FORMAT, "events": len(buffer.events)}, sensitive=True) as sink:
            sink.write(header(types, len(buffer.events), first, last))
            for event in buffer.events:
                sink.write(event.line())
        return meta, Span(first, last, buffer.first_time, buffer.events[-1].at)


def _api_facts(client: KubeClient) -> dict[str, list[str]]:
    """The source's API server, for a full whose plugin records no failure domain of its own (kueue): `drtool
    failover` finds the primary it probes in these facts (drtool/standby/failover.py)."""
    return {"kubernetes_api_endpoints": [client.server], "kubernetes_api_hosts": [client.host]}


def _list_rv(client: KubeClient, w: Watched) -> str:
    page = client.get(w.type.path(), {**w.params, "limit": 1})
    return str((page.get("metadata") or {}).get("resourceVersion") or "")


def follow(scope: Scope, ctx: FollowContext) -> None:
    Follower(scope, ctx).run()
