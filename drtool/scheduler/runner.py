"""One run of a backup set: back up, record metrics and history, then prune per the set's retention.

Runs in the main thread (signals are delivered there): SIGTERM/SIGINT raise ``Interrupted`` inside the
backup, which unwinds through the backup session, so no manifest is written (no visible partial backup),
upload workers are cancelled and the store lock is released. The process then exits 0.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from drtool.backup import run_backup
from drtool.errors import DrtoolError
from drtool.metrics import BackupMetrics
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.plugin.settings import check_sources
from drtool.prune import PruneReport, prune
from drtool.repo.lock import StoreLocked
from drtool.repo.manifest import utc_now
from drtool.repo.repository import Repository
from drtool.scheduler.history import RunHistory, ScheduleRunRow
from drtool.scheduler.sets import BackupSet

if TYPE_CHECKING:
    from drtool.catalog import Catalog

PRUNE_LOCK_WAIT = 60.0  # a prune that finds backups running skips this time; the next run tries again


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived while a backup or prune was running.

    A BaseException, like KeyboardInterrupt, so a plugin's ``except Exception`` cannot swallow it."""


class Stopper:
    """Turns SIGTERM/SIGINT into "stop taking work" plus, the first time, ``Interrupted`` in running work."""

    def __init__(self) -> None:
        self.stopping = False
        self._busy = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.stopping
        self.stopping = True
        if first and self._busy:
            self._busy = False  # raise once: cleanup code that runs after it must not be interrupted again
            raise Interrupted(signal.Signals(signum).name)

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        if self.stopping:
            raise Interrupted("stopping")
        self._busy = True
        try:
            yield
        finally:
            self._busy = False


@dataclasses.dataclass
class RunResult:
    backup_set: str
    status: str  # ok | partial | failed | interrupted
    backup_id: str = ""
    reason: str = ""
    error: str = ""
    exit_code: int = 0  # of the error that failed the run (drtool/errors.py), for `schedule run-once`
    duration: float = 0.0
    prune: PruneReport | None = None
    prune_note: str = ""


class SetRunner:
    def __init__(
        self,
        repo: Repository,
        sets: dict[str, BackupSet],
        default_sources: dict[str, dict],
        *,
        metrics: BackupMetrics | None = None,
        catalog: Catalog | None = None,
        stopper: Stopper | None = None,
        prune_lock_wait: float = PRUNE_LOCK_WAIT,
    ) -> None:
        self.repo = repo
        self.sets = sets
        self.default_sources = default_sources
        self.metrics = metrics or BackupMetrics()
        self.catalog = catalog
        self.history = RunHistory(catalog.engine) if catalog is not None else None
        self.stopper = stopper or Stopper()
        self.prune_lock_wait = prune_lock_wait
        installed = load_plugins()
        for name, bset in sets.items():
            # a misspelled source key stops the scheduler at its start, not each run
            chosen = [installed[p] for p in bset.plugins if p in installed]
            check_sources(chosen, bset.sources_for(default_sources), f"backup set {name}: ")
            self.metrics.declare(name, bset.rpo.total_seconds() if bset.rpo else None)
        self.metrics.record_store(repo.backend.url)

    def run(self, name: str, prune: bool = True) -> RunResult:
        """Back up set ``name``, then prune it (``prune=False``: a backup-only identity, whose prune runs
        elsewhere). Failures are results, not exceptions; ``Interrupted`` propagates after the run is
        recorded as interrupted."""
        bset = self.sets[name]
        started, t0 = utc_now(), time.monotonic()
        result = RunResult(name, "failed")
        try:
            with self.stopper.interruptible():
                self._backup(name, bset, result)
                if prune and result.status in ("ok", "partial"):
                    self._prune(name, bset, result)
        except Interrupted as exc:
            result.status, result.reason, result.error = "interrupted", "Interrupted", f"stopped by {exc}"
            raise
        finally:
            result.duration = time.monotonic() - t0
            if result.status in ("failed", "interrupted"):
                self.metrics.record_failure(name, result.reason, result.duration)
            self.metrics.record_store(self.repo.backend.url)
            self._record(started, result)
        return result

    def _backup(self, name: str, bset: BackupSet, result: RunResult) -> None:
        t0 = time.monotonic()
        try:
            plugins = [get_plugin(p) for p in bset.plugins]
            manifest = run_backup(
                self.repo,
                plugins,
                bset.sources_for(self.default_sources),
                catalog=self.catalog,
                backup_set=name,
                tags=bset.tags,
            )
        except DrtoolError as exc:
            result.reason, result.error, result.exit_code = type(exc).__name__, exc.one_line(), exc.exit_code
            return
        result.backup_id = manifest.id
        result.status = "ok" if manifest.status == "complete" else "partial"
        if result.status == "partial":
            result.reason = "PartialBackup"
            result.error = "; ".join(f"{p}: {o.error}" for p, o in manifest.plugins.items() if o.status == "failed")
        self.metrics.record_success(name, manifest, time.monotonic() - t0)

    def _prune(self, name: str, bset: BackupSet, result: RunResult) -> None:
        try:
            report = prune(self.repo, {name: bset.retention}, only_set=name, lock_wait=self.prune_lock_wait)
        except StoreLocked as exc:
            result.prune_note = f"prune skipped, store busy: {exc.message}"
            return
        except DrtoolError as exc:
            result.prune_note = f"prune failed: {exc.one_line()}"
            return
        result.prune = report
        if report.locked_objects:
            result.prune_note = f"{len(report.locked_objects)} object(s) kept for Object Lock"
        if report.unreadable_manifests:
            result.prune_note = f"no chunks deleted: {len(report.unreadable_manifests)} unreadable manifest(s)"
        self.metrics.record_prune(name, report)
        if self.catalog is not None and report.forgotten:
            self.catalog.sync(self.repo)

    def _record(self, started: str, result: RunResult) -> None:
        if self.history is None:
            return
        report = result.prune
        self.history.record(
            ScheduleRunRow(
                backup_set=result.backup_set,
                started=started,
                finished=utc_now(),
                status=result.status,
                backup_id=result.backup_id,
                reason=result.reason,
                error=result.error,
                forgotten=len(report.forgotten) if report else 0,
                chunks_deleted=report.chunks_deleted if report else 0,
                prune_note=result.prune_note,
            )
        )
