"""`drtool standby`: apply each new chain link of a set to a standby target, held, in chain order.

One round: read the fence (a fenced set's later links are the old primary's and are never applied), read
the manifests the store gained since the last round, skip and report what does not authenticate, then for
each new link in store order: authenticate all of its artifacts, mark it ``applying`` in the record, hand
it to its plugin's ``hydrate`` (drtool/plugin/contract.py, ``StandbySupport``), and record the position the
plugin's state then reaches. Between links each plugin ``settle``s the deletions whose ``--delete-after``
passed. The record lives on the standby cluster (drtool/standby/state.py says why and how a killed
standby resumes).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from drtool.errors import DrtoolError, UsageError
from drtool.plugin.contract import Hydrated, Plugin, StandbyOptions, StandbySupport
from drtool.plugin.contract import StandbyState as PluginState
from drtool.repo.chains import Link
from drtool.repo.fences import read_fence
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.standby.links import LinkWatcher, authenticate, iso, parse_iso
from drtool.standby.metrics import StandbyMetrics
from drtool.standby.state import StandbyRecord, StateStore

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Round:
    """What one round did."""

    applied: list[str] = dataclasses.field(default_factory=list)  # backup ids
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    deleted: int = 0
    deferred: int = 0
    held: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)
    newest_stored: dt.datetime | None = None
    applied_stored: dt.datetime | None = None

    @property
    def lag_s(self) -> float | None:
        if self.applied_stored is None:
            return None
        newest = self.newest_stored or self.applied_stored
        return max(0.0, (newest - self.applied_stored).total_seconds())


def standby_plugins(plugins: Sequence[Plugin]) -> list[Any]:
    """The set's plugins, each with the standby hooks; a usage error names one without them."""
    for plugin in plugins:
        if not isinstance(plugin, StandbySupport):
            raise UsageError(
                f"plugin {plugin.name} cannot keep a standby (no `hydrate`/`settle`/`release` hooks)",
                "a standby set names plugins with StandbySupport (kubernetes, kueue); docs/standby.md",
            )
    return list(plugins)


class Standby:
    """One set hydrating into one target; ``round`` is safe to call again after any failure."""

    def __init__(
        self,
        repo: Repository,
        backup_set: str,
        plugins: Sequence[Plugin],
        target: Mapping[str, Any],
        store: StateStore,
        *,
        delete_after: float,
        metrics: StandbyMetrics | None = None,
        on_event: Callable[[str], None] = log.info,
    ) -> None:
        self.repo = repo
        self.backup_set = backup_set
        self.plugins = {p.name: p for p in standby_plugins(plugins)}
        self.target = dict(target)
        self.store = store
        self.options = StandbyOptions(delete_after=delete_after)
        self.metrics = metrics or StandbyMetrics()
        self.event = on_event
        self.record: StandbyRecord = store.load()
        self.watcher = LinkWatcher(repo, backup_set, list(self.plugins))
        if self.record.applying:
            self.event(
                f"resuming: link {self.record.applying['backup_id']} ({self.record.applying['plugin']}) was being "
                "applied when the standby stopped; it is applied again (idempotent)"
            )

    def round(self) -> Round:
        done = Round()
        fenced_after = self._fence()
        positions = {name: pos for name in self.plugins if (pos := self.record.position(name)) is not None}
        pending = self.watcher.poll(positions, fenced_after)
        done.newest_stored = pending.newest_stored
        self.metrics.positions(self.backup_set, self._applied_stored(), done.newest_stored)  # lag while applying
        for skip in pending.skipped:
            self._skip(done, skip.name, skip.reason)
        for link in pending.links:
            if link.backup_id in self.record.skipped:
                continue
            reason = authenticate(self.repo, link.manifest, link.plugin)
            if reason is not None:
                self._skip(done, link.backup_id, f"an artifact does not authenticate: {reason}")
                continue
            self._apply(done, link)
        for name, plugin in self.plugins.items():
            self._count(done, plugin.settle(self.target, self.state_of(name), self.options), name)
        self.store.save(self.record)
        done.deferred = sum(len((self.record.plugins.get(n) or {}).get("deferred") or {}) for n in self.plugins)
        done.applied_stored = self._applied_stored()
        self.metrics.positions(self.backup_set, done.applied_stored, done.newest_stored)
        self.metrics.held.labels(self.backup_set).set(done.deferred)
        return done

    def run(self, interval: float, stop: threading.Event, on_round: Callable[[Round], None] | None = None) -> None:
        """Rounds every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                done = self.round()
            except DrtoolError as exc:  # the store or the target away for a while: the next round retries
                self.event(f"round failed: {exc.one_line()}; retrying in {interval:.0f} s")
            else:
                if on_round is not None:
                    on_round(done)
            stop.wait(interval)

    # --- one link ---------------------------------------------------------------------------------

    def _apply(self, done: Round, link: Link) -> None:
        self.record.applying = {"plugin": link.plugin, "backup_id": link.backup_id}
        self.store.save(self.record)
        ctx = PluginRestoreContext(self.repo, link.manifest, link.plugin)
        result = self.plugins[link.plugin].hydrate(ctx, self.target, self.state_of(link.plugin), self.options)
        state = result.state
        state.chain, state.seq, state.link, state.link_time = link.base, link.seq, link.backup_id, iso(link.last_time)
        self._count(done, result, link.plugin)
        if link.stored is not None:
            self.record.stored[link.plugin] = iso(link.stored)
        self.record.applying = None
        self.record.applied += 1
        self.store.save(self.record)
        self.metrics.applied.labels(self.backup_set).inc()
        done.applied.append(link.backup_id)
        self.event(
            f"applied {link.kind} {link.backup_id} ({link.plugin} seq {link.seq}): {result.created} created, "
            f"{result.updated} updated, {result.unchanged} unchanged, {result.deleted} deleted, "
            f"{result.deferred} deletion(s) held back, {result.held} held"
        )

    def state_of(self, plugin: str) -> PluginState:
        raw = self.record.plugins.get(plugin)
        return PluginState.from_json(raw) if raw else PluginState(plugin=plugin)

    def _count(self, done: Round, result: Hydrated, plugin: str) -> None:
        self.record.plugins[plugin] = result.state.to_json()
        done.deleted += result.deleted
        done.held += result.held
        for line in result.failed:
            done.failed.append(line)
            self.event(f"{plugin}: the target refused {line}")

    def _skip(self, done: Round, name: str, reason: str) -> None:
        if name in self.record.skipped:
            return
        self.record.skipped[name] = reason
        done.skipped[name] = reason
        self.metrics.skipped.labels(self.backup_set).inc()
        self.event(f"skipped {name}: {reason} (never applied; docs/standby.md)")

    def _fence(self) -> dt.datetime | None:
        """The store time after which links are the fenced primary's: from the store's fence, or the one
        this standby saw before (kept even when the record was deleted from the store since)."""
        fence = read_fence(self.repo, self.backup_set)
        if fence is not None and self.record.fence is None:
            self.record.fence = fence.to_json()
            self.event(f"set {self.backup_set} was fenced at {fence.written} ({fence.reason})")
        if self.record.fence is None:
            return None
        self.metrics.fenced.labels(self.backup_set).set(1)
        return parse_iso(self.record.fence.get("stored")) or parse_iso(self.record.fence.get("written"))

    def _applied_stored(self) -> dt.datetime | None:
        times = [t for t in (parse_iso(s) for s in self.record.stored.values()) if t is not None]
        return max(times, default=None)
