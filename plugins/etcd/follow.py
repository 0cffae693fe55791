"""`drtool follow -p etcd`: a full snapshot at revision R, then deltas of the watch stream from R+1.

The loop (docs/etcd.md, "Continuous backup"):
- Resume or start. The chain's tip (its last durable link) says the next revision to watch from; a new
  chain (a full snapshot) starts when there is no tip, when the cluster id differs (another cluster),
  when etcd's revision went backwards (restored in place), or when etcd compacted past the tip.
- Watch from the next revision with ``prev_kv``. Every revision must arrive exactly once and in order:
  revisions already held are dropped (a reconnect re-delivers them), a revision past the next expected
  one is a gap, and the stream is reopened from the expected revision; a gap that persists starts a new
  chain instead of being papered over.
- Buffer whole revisions in memory and write a delta every ``period`` seconds (counted from the oldest
  buffered revision, so that is the RPO) or when ``max_events``/``max_bytes`` are buffered. A delta is an
  ordinary backup, so it exists only once complete; a kill -9 loses the buffer, and the next run watches
  again from the tip (nothing is lost while etcd still has those revisions).
- Disconnects (etcd restarted, leader change, network): reconnect with backoff, any endpoint; the
  buffer is kept and still flushed on time. SIGTERM: write the buffer as a last delta, return.
- Leases: a put names its lease id; the lease's granted TTL is asked of etcd once and recorded in the
  delta's header, so a restore can grant the same lease id with the same TTL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError, StoreUnavailable, UsageError
from drtool.plugin.contract import BackupContext, FollowContext, Span

from . import backup as _backup
from .client import EtcdClient, EtcdSettings, connect
from .deltas import ARTIFACT, Op, Revision, header, now_text
from .watch import Message, WatchStream

log = logging.getLogger(__name__)

DEFAULT_PERIOD = 20.0
DEFAULT_MAX_EVENTS = 100_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
RECONNECT_BACKOFF = (0.2, 5.0)  # first and longest wait between connection attempts


@dataclasses.dataclass(frozen=True)
class FollowOptions:
    period: float = DEFAULT_PERIOD
    max_events: int = DEFAULT_MAX_EVENTS
    max_bytes: int = DEFAULT_MAX_BYTES
    idle: float = 30.0  # reopen a watch stream that stayed silent this long

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> FollowOptions:
        try:
            parsed = cls(
                period=float(options.get("period", DEFAULT_PERIOD)),
                max_events=int(options.get("max_events", DEFAULT_MAX_EVENTS)),
                max_bytes=int(options.get("max_bytes", DEFAULT_MAX_BYTES)),
                idle=float(options.get("idle", 30.0)),
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(f"bad etcd follow option: {exc}", "period and idle are seconds, the rest counts") from None
        if parsed.period <= 0 or parsed.max_events <= 0 or parsed.max_bytes <= 0 or parsed.idle <= 0:
            raise UsageError("etcd follow options must be positive", "for example --period 20")
        return parsed


class NeedFull(Exception):
    """The chain cannot continue (compaction, another cluster, history rewound): start a new one."""


class Buffer:
    """Whole revisions waiting for the next delta, as encoded lines."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.first = 0
        self.last = 0
        self.first_time = ""
        self.last_time = ""
        self.events = 0
        self.bytes = 0
        self.leases: set[int] = set()
        self.started = 0.0  # monotonic time the oldest buffered revision arrived

    def add(self, rev: Revision) -> None:
        if not self.lines:
            self.first, self.first_time, self.started = rev.revision, rev.time, time.monotonic()
        line = rev.line()
        self.lines.append(line)
        self.last, self.last_time = rev.revision, rev.time
        self.events += len(rev.ops)
        self.bytes += len(line)
        self.leases |= rev.leases

    def __len__(self) -> int:
        return len(self.lines)


@dataclasses.dataclass
class Counters:
    """What the follower saw since the last delta; recorded in that delta's meta (continuity evidence)."""

    reconnects: int = 0
    duplicates_dropped: int = 0
    gaps_reopened: int = 0

    def reset(self) -> dict[str, int]:
        out = dataclasses.asdict(self)
        self.reconnects = self.duplicates_dropped = self.gaps_reopened = 0
        return out


def follow(source: Mapping[str, Any], ctx: FollowContext) -> None:
    Follower(source, ctx).run()


class Follower:
    def __init__(self, source: Mapping[str, Any], ctx: FollowContext) -> None:
        self.source = source
        self.settings = EtcdSettings.from_mapping(source)
        self.ctx = ctx
        self.options = FollowOptions.parse(ctx.options)
        self.tip: Any = ctx.tip()
        self.next_rev = self.tip.link.last + 1 if self.tip else 0
        self.cluster_id = str(self.tip.meta.get("cluster_id")) if self.tip else ""
        self.buffer = Buffer()
        self.counters = Counters()
        self.lease_ttls: dict[int, int | None] = {}
        self.endpoint = ""
        self.last_flush_error = ""

    # --- the loop -----------------------------------------------------------------------------------

    def run(self) -> None:
        backoff = RECONNECT_BACKOFF[0]
        try:
            while not self.ctx.stopping():
                try:
                    client, status = connect(self.settings)
                except SourceError as exc:
                    log.warning("follow: %s; retrying in %.1fs", exc.message, backoff)
                    self._pause(backoff)
                    backoff = min(backoff * 2, RECONNECT_BACKOFF[1])
                    continue
                backoff = RECONNECT_BACKOFF[0]
                with client:
                    self._session(client, status)
        finally:
            self._flush(final=True)

    def _pause(self, seconds: float) -> None:
        """Wait while disconnected, still writing the buffer when its period is up."""
        deadline = time.monotonic() + seconds
        while not self.ctx.stopping() and time.monotonic() < deadline:
            self._flush_if_due()
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def _session(self, client: EtcdClient, status: Mapping[str, Any]) -> None:
        """One connection: start a chain if needed, then stream until it breaks or we are stopped."""
        self.endpoint = client.endpoint
        try:
            if self.tip is None or self._must_restart(status):
                self._start_chain(client)
            self._stream(client)
        except NeedFull as why:
            log.warning("follow: starting a new chain: %s", why)
            self._flush()
            self.tip = None
        except SourceError as exc:
            log.warning("follow: %s (next revision %d)", exc.message, self.next_rev)
            self.counters.reconnects += 1

    def _must_restart(self, status: Mapping[str, Any]) -> bool:
        cluster_id = str(status["header"].get("cluster_id"))
        revision = int(status["header"]["revision"])
        if cluster_id != self.cluster_id:
            log.warning("follow: etcd cluster id %s is not the chain's %s", cluster_id, self.cluster_id)
            return True
        if revision < self.next_rev - 1:
            log.warning("follow: etcd is at revision %d, behind the chain's %d", revision, self.next_rev - 1)
            return True
        return False

    def _start_chain(self, client: EtcdClient) -> None:
        """A full snapshot; the watch then starts right after the revision seen before the snapshot."""
        self._flush()

        def write(bctx: BackupContext) -> tuple[Mapping[str, Any], Span]:
            source = {**self.source, "endpoints": [client.endpoint]}
            meta = _backup.backup(source, bctx)
            before, after = meta["revision_bounds"]
            # the watch starts after the lower bound (nothing missed) and the chain records the upper bound
            # (no point before it is served from this snapshot); the replay skips what the snapshot holds
            self.next_rev = int(before) + 1
            return meta, Span(None, int(after), None, now_text())

        self.tip = self.ctx.write_full(write)
        self.cluster_id = str(self.tip.meta.get("cluster_id"))
        log.info("follow: full snapshot %s at revision %s", self.tip.link.backup_id, self.tip.link.last)

    def _stream(self, client: EtcdClient) -> None:
        watch = WatchStream(client, self.next_rev, self.options.idle)
        try:
            while not self.ctx.stopping():
                message = watch.get(timeout=self._until_due())
                if message is not None:
                    self._take(client, message)
                self._flush_if_due()
        finally:
            watch.close()

    def _take(self, client: EtcdClient, message: Message) -> None:
        if message.error is not None or message.result is None:
            raise SourceError(message.error or "the watch stream ended")
        result = message.result
        if result.get("canceled") or result.get("compact_revision") not in (None, "0", 0):
            compacted = int(result.get("compact_revision") or 0)
            if compacted:
                raise NeedFull(f"etcd compacted revision {compacted}, past the chain's next revision {self.next_rev}")
            raise SourceError(f"etcd cancelled the watch: {result.get('cancel_reason') or 'no reason given'}")
        for rev in _revisions(result.get("events") or [], message.time):
            if rev.revision < self.next_rev:
                self.counters.duplicates_dropped += 1
                continue
            if rev.revision > self.next_rev:
                self.counters.gaps_reopened += 1
                if self.counters.gaps_reopened > 3:
                    raise NeedFull(f"revisions {self.next_rev}..{rev.revision - 1} never arrived")
                raise SourceError(f"watch skipped revisions {self.next_rev}..{rev.revision - 1}; reopening it")
            self._learn_leases(client, rev)
            self.buffer.add(rev)
            self.next_rev = rev.revision + 1
            if len(self.buffer) and (
                self.buffer.events >= self.options.max_events or self.buffer.bytes >= self.options.max_bytes
            ):
                self._flush()

    def _learn_leases(self, client: EtcdClient, rev: Revision) -> None:
        for lease in rev.leases - self.lease_ttls.keys():
            ttl: int | None = None
            with contextlib.suppress(SourceError):
                answer = client.call("/v3/lease/timetolive", {"ID": lease})
                granted = int(answer.get("grantedTTL") or 0)
                ttl = granted if granted > 0 else None  # already expired or revoked: its keys go soon
            self.lease_ttls[lease] = ttl

    # --- writing deltas -----------------------------------------------------------------------------

    def _until_due(self) -> float:
        if not len(self.buffer):
            return 0.5
        return min(0.5, max(0.0, self.buffer.started + self.options.period - time.monotonic()))

    def _flush_if_due(self) -> None:
        if len(self.buffer) and time.monotonic() - self.buffer.started >= self.options.period:
            self._flush()

    def _flush(self, final: bool = False) -> None:
        """Write the buffer as the next delta. A store failure keeps the buffer for the next attempt
        (or, when stopping, is raised: nothing more can be done)."""
        if not len(self.buffer) or self.tip is None:
            return
        buffer = self.buffer
        try:
            self.tip = self.ctx.write_delta(self.tip, lambda bctx: self._write(bctx, buffer))
        except StoreUnavailable as exc:
            if final:
                raise
            if exc.message != self.last_flush_error:
                log.warning("follow: delta not written, keeping %d revisions: %s", len(buffer), exc.message)
            self.last_flush_error = exc.message
            buffer.started = time.monotonic()  # retry after another period
            return
        self.last_flush_error = ""
        self.buffer = Buffer()
        log.info("follow: delta %s revisions %d..%d", self.tip.link.backup_id, buffer.first, buffer.last)

    def _write(self, bctx: BackupContext, buffer: Buffer) -> tuple[Mapping[str, Any], Span]:
        leases = {lease: self.lease_ttls.get(lease) for lease in buffer.leases}
        meta = {
            "artifact": ARTIFACT,
            "kind": "etcd-delta",
            "cluster_id": self.cluster_id,
            "endpoint": self.endpoint,
            "first_revision": buffer.first,
            "last_revision": buffer.last,
            "revisions": len(buffer),
            "events": buffer.events,
            "leases": len(leases),
            "follows": self.tip.link.backup_id,
            **self.counters.reset(),
        }
        artifact_meta = {"format": "drtool-etcd-deltas", "first": buffer.first, "last": buffer.last}
        with bctx.artifact(ARTIFACT, meta=artifact_meta, sensitive=True) as sink:
            sink.write(header(self.cluster_id, buffer.first, buffer.last, buffer.events, leases))
            for line in buffer.lines:
                sink.write(line)
        return meta, Span(buffer.first, buffer.last, buffer.first_time, buffer.last_time)


def _revisions(events: list[Mapping[str, Any]], received: str) -> list[Revision]:
    """Group a message's events by revision (etcd sends a revision's events together, in order)."""
    grouped: dict[int, list[Op]] = {}
    for event in events:
        rev = int((event.get("kv") or {}).get("mod_revision", 0))
        grouped.setdefault(rev, []).append(Op.from_event(event))
    return [Revision(rev, received, tuple(ops)) for rev, ops in sorted(grouped.items())]
