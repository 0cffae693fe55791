"""Restore a backup into a (new, empty) cluster, level by level (``order.py``), owners before dependents.

1. Read every artifact once to the end: the store verifies each one's hash, so nothing is written from
   a damaged backup (and the pass learns which uids are owners).
   Then every type is resolved against the versions the target serves (``versions.py``: another
   Kubernetes release, a newer CRD): converted through a served version, or refused by name.
2. With ``existing: fail``, compare every object that already exists in the target with the backup
   (a digest of each, from one LIST per type) and stop before writing anything if one differs.
3. CRDs, then wait until each is Established and its resources are served.
4. Every other level: objects applied concurrently (server-side apply); an object whose owner is in the
   backup but not restored yet waits for it (across levels too), then gets the owner's NEW uid.
With ``dry_run`` every write is the API server's own dry run, and the result lists what would be created,
changed or left alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from threading import BoundedSemaphore, Event, Lock
from typing import Any

from drtool.errors import SourceError, UsageError
from drtool.plugin.contract import RestoreContext, RestoreResult

from . import drift
from .apply import DEFER, Applier, Existing, Owners
from .artifacts import CRDS, records, scan, types_in
from .client import ApiError, KubeClient
from .crds import wait_established
from .discovery import ResourceType
from .holds import release
from .objects import object_key
from .order import levels
from .settings import Connection, RestoreOptions
from .versions import check_converted, kept_crd, resolve

log = logging.getLogger(__name__)
MAX_LISTED = 50  # object names listed per outcome in a result's details


class Tally:
    """Outcome counts per type and the first names per outcome; shared by the apply workers."""

    def __init__(self) -> None:
        self.by_type: dict[str, dict[str, int]] = {}
        self.names: dict[str, list[str]] = {}
        self.failed: list[str] = []
        self._lock = Lock()

    def add(self, t: ResourceType, outcome: str, key: str) -> None:
        with self._lock:
            counts = self.by_type.setdefault(t.key, {})
            counts[outcome] = counts.get(outcome, 0) + 1
            names = self.names.setdefault(outcome, [])
            if len(names) < MAX_LISTED:
                names.append(f"{t.key} {key}")

    def fail(self, t: ResourceType, key: str, exc: ApiError) -> None:
        with self._lock:
            self.failed.append(f"{t.key} {key}: {exc.status} {exc.reason}: {exc.message.rsplit(': ', 1)[-1]}")

    def total(self, outcome: str) -> int:
        return sum(c.get(outcome, 0) for c in self.by_type.values())

    def objects(self) -> int:
        return sum(sum(c.values()) for c in self.by_type.values())

    def changed(self) -> bool:
        return bool(self.total("created") or self.total("changed"))

    def would(self) -> dict[str, list[str]]:
        """A dry run's details: the first names that would be created and changed."""
        return {"would_create": self.names.get("create", []), "would_change": self.names.get("change", [])}

    def dry_run_summary(self, server: str, note: str = "") -> str:
        return (
            f"dry run against {server}: {self.total('create')} would be created, "
            f"{self.total('change')} changed, {self.total('unchanged')} left alone{note}"
        )


class _Restore:
    def __init__(self, ctx: RestoreContext, client: KubeClient, opts: RestoreOptions) -> None:
        self.ctx, self.client, self.opts = ctx, client, opts
        backed_up = types_in(ctx)
        self.scan = scan(ctx, backed_up)  # pass 1: verifies every artifact before anything is written
        self.versions = resolve(client, backed_up, self.scan.crd_names)  # another Kubernetes version
        check_converted(client, ctx, self.versions)
        self.types = self.versions.types
        self.existing = Existing(client)
        self.owners = Owners(self.existing, self.types, self.scan.uids, self.scan.owner_uids)
        self.applier = Applier(client, opts, self.existing, self.owners)
        self.tally = Tally()
        self.deferred: list[tuple[ResourceType, dict[str, Any]]] = []
        self.progress = ctx.progress("objects", sum(self.scan.counts.values()))


def restore_objects(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    opts = RestoreOptions.parse(target, options)
    client = KubeClient(Connection.from_mapping(target))
    if opts.release:
        return _release(ctx, client, opts)
    run = _Restore(ctx, client, opts)
    started = time.monotonic()
    if opts.dry_run:
        _dry_run(run)
    else:
        if opts.existing == "fail":
            _refuse_conflicts(run)
        _apply_all(run)
    return _result(run, time.monotonic() - started)


def _apply_all(run: _Restore) -> None:
    """Every level in order on one pool (its threads keep their connections from level to level)."""
    with ThreadPoolExecutor(max_workers=run.opts.workers, thread_name_prefix="drtool-k8s-apply") as pool:
        slots = BoundedSemaphore(4 * run.opts.workers)  # bounds the records in flight: flat memory
        for level in levels(run.types):
            started = time.monotonic()
            pending = chain(run.deferred, ((t, rec) for t in level for rec in records(run.ctx, t)))
            run.deferred = []
            _drain(pool, slots, pending, lambda t, rec: _apply_one(run, t, rec, final=False))
            _retry_deferred(run, pool, slots)
            if level[0].key == CRDS:
                _after_crds(run)
            log.debug("level %s: %.2fs", ",".join(t.key for t in level), time.monotonic() - started)
        _drain(pool, slots, run.deferred, lambda t, rec: _apply_one(run, t, rec, final=True))
    if run.tally.failed:
        first = run.tally.failed[0]
        raise SourceError(
            f"restore into {run.client.server} failed for {len(run.tally.failed)} object(s), first: {first}",
            "objects restored so far stay; fix the cause and run the restore again (it is idempotent)",
        )


def _retry_deferred(run: _Restore, pool: ThreadPoolExecutor, slots: BoundedSemaphore) -> None:
    """Objects waiting for an owner of the same level: retry while each round restores something."""
    while run.deferred:
        waiting, run.deferred = run.deferred, []
        _drain(pool, slots, waiting, lambda t, rec: _apply_one(run, t, rec, final=False))
        if len(run.deferred) == len(waiting):
            return  # their owners are in a later level (or missing): carried over


def _drain(
    pool: ThreadPoolExecutor,
    slots: BoundedSemaphore,
    items: Iterable[tuple[ResourceType, dict[str, Any]]],
    fn: Callable[[ResourceType, dict[str, Any]], None],
) -> None:
    """Run ``fn`` on every item on the pool, with at most ``slots`` records in flight (flat memory); the
    first unexpected error of a worker (a lost connection) is raised once the items in flight are done.

    Failures are collected by each future's callback, not by polling the futures in flight after every
    submit: that polling took a tenth of drtool's CPU in a 4,000-object restore (docs/performance.md)."""
    failures: list[BaseException] = []
    done = Event()
    left = [1]  # items submitted and not finished, plus one for the submitting loop itself
    lock = Lock()

    def finished(fut: Future[None]) -> None:
        if (exc := fut.exception()) is not None:
            failures.append(exc)
        slots.release()
        _count_down(lock, left, done)

    for t, rec in items:
        if failures:
            break
        slots.acquire()
        with lock:
            left[0] += 1
        pool.submit(fn, t, rec).add_done_callback(finished)
    _count_down(lock, left, done)
    done.wait()
    if failures:
        raise failures[0]


def _count_down(lock: Lock, left: list[int], done: Event) -> None:
    with lock:
        left[0] -= 1
        if not left[0]:
            done.set()


def _apply_one(run: _Restore, t: ResourceType, rec: dict[str, Any], final: bool) -> None:
    key = object_key(rec["object"])
    if kept_crd(run.versions, t, rec["object"]):
        run.tally.add(t, "kept", key)  # the target operator's newer CRD
        run.progress.advance(1)
        return
    try:
        outcome = run.applier.apply(rec, t, final)
    except ApiError as exc:
        run.tally.fail(t, key, exc)
        run.progress.advance(1)
        return
    if outcome == DEFER:
        run.deferred.append((t, rec))  # list.append is atomic; read only after the pool drained
        return
    run.tally.add(t, outcome, key)
    run.progress.advance(1)


def _after_crds(run: _Restore) -> None:
    """Wait for the restored CRDs, then forget what was known about their types (they are served now)."""
    crd_types = [t for t in run.types if t.crd and t.key in run.scan.crd_names]
    wait_established(run.client, run.opts, crd_types)
    for t in crd_types:
        run.existing.forget(t)


def _all_records(run: _Restore) -> Iterator[tuple[ResourceType, dict[str, Any]]]:
    for level in levels(run.types):
        for t in level:
            for rec in records(run.ctx, t):
                yield t, rec


def _dry_run(run: _Restore) -> None:
    def one(t: ResourceType, rec: dict[str, Any]) -> None:
        key = object_key(rec["object"])
        try:
            outcome = "unchanged" if kept_crd(run.versions, t, rec["object"]) else run.applier.classify(rec, t)
            run.tally.add(t, outcome, key)
        except ApiError as exc:
            run.tally.fail(t, key, exc)

    with ThreadPoolExecutor(max_workers=run.opts.workers) as pool:
        _drain(pool, BoundedSemaphore(4 * run.opts.workers), _all_records(run), one)


def _refuse_conflicts(run: _Restore) -> None:
    """existing=fail: find objects that exist and differ BEFORE writing anything."""
    conflicts = [
        f"{t.key} {object_key(rec['object'])}"
        for t, rec in _all_records(run)
        if not kept_crd(run.versions, t, rec["object"]) and run.applier.differs(rec, t)
    ]
    if conflicts:
        more = f" (+{len(conflicts) - 3} more)" if len(conflicts) > 3 else ""
        raise UsageError(
            f"{len(conflicts)} object(s) already exist in {run.client.server} and differ from the backup: "
            f"{', '.join(conflicts[:3])}{more}; nothing was written",
            "restore with existing=update (server-side apply) or existing=skip, or clean the target",
        )


def _result(run: _Restore, seconds: float) -> RestoreResult:
    t = run.tally
    details: dict[str, Any] = {
        "server": run.client.server,
        "by_type": t.by_type,
        "owners_remapped": len(run.owners.new),
        "owner_references_dropped": run.owners.dropped,
        "seconds": round(seconds, 3),
        "versions": run.versions.details(),
        "held": sorted(run.applier.held)[:MAX_LISTED],
        "rewrites": sorted({r.line() for r in run.applier.rewrites})[:MAX_LISTED],
    }
    note = f", {len(run.applier.held)} held until a release step (drtool.kube.holds)" if run.applier.held else ""
    if run.opts.dry_run:
        details |= t.would()
        details["would_fail"] = t.failed  # rejected by the server's own validation and admission
        rejected = f", {len(t.failed)} REJECTED (see would_fail)" if t.failed else ""
        return RestoreResult(
            changed=False,
            summary=t.dry_run_summary(run.client.server, rejected + run.versions.summary() + note),
            details=details,
        )
    details["changed_objects"] = t.names.get("changed", [])
    summary = (
        f"{t.objects()} objects into {run.client.server} in {seconds:.1f}s: {t.total('created')} created, "
        f"{t.total('changed')} changed, {t.total('unchanged')} unchanged, {t.total('skipped')} skipped (existing)"
    )
    if t.total("kept"):
        summary += f", {t.total('kept')} kept from the target's own install (webhooks, aggregated APIs, newer CRDs)"
    summary += run.versions.summary() + note
    return RestoreResult(changed=t.changed(), summary=summary, details=details)


def _release(ctx: RestoreContext, client: KubeClient, opts: RestoreOptions) -> RestoreResult:
    """A release step (``release: true``): what a restore of this backup held, put back to the backup's values;
    with ``drift``, what the released GitOps apps then changed (``drift``)."""
    scope = drift.scope_of(ctx, opts.namespace_map) if opts.drift > 0 and not opts.dry_run else {}
    apps = [(t, key) for t, keys in scope.items() if drift.is_gitops(t) for key in sorted(keys)]
    before = drift.Snapshot(client, scope) if apps else None
    since = drift.now()
    out = release(ctx, client, opts.namespace_map, opts.dry_run)
    would = "would release" if opts.dry_run else "released"
    summary = f"{would} {len(out['released'])} held object(s) in {client.server}"
    if out["records"]:
        summary += f"; {len(out['records'])} completed Job(s) kept as records, not re-run"
    if out["missing"]:
        summary += f"; {len(out['missing'])} not in the target"
    if before is not None:
        out["not_reconciled"] = drift.wait_reconciled(client, apps, since, opts.drift)
        out["drift"] = drift.changes(before, drift.Snapshot(client, scope))
        summary += f"; after reconciling, the GitOps controllers changed {len(out['drift'])} thing(s)"
        if out["not_reconciled"]:
            summary += f" ({len(out['not_reconciled'])} app(s) not reconciled within {opts.drift:g}s)"
    return RestoreResult(changed=bool(out["released"]) and not opts.dry_run, summary=summary, details=out)
