"""Prometheus metrics for scheduled and one-shot backups (docs/metrics.md).

One ``BackupMetrics`` per process, on its own registry (not the global default, so tests and embedders get
only drtool's series). ``drtool schedule run`` serves it over HTTP; a one-shot run writes it to a textfile
for node_exporter's textfile collector or pushes it to a Pushgateway. RPO age is computed at scrape time,
so an alert fires when backups stop, not only when one fails.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, push_to_gateway, start_http_server, write_to_textfile
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from drtool.prune import PruneReport
    from drtool.repo.manifest import Manifest

_SET = ("set",)
_SET_PLUGIN = ("set", "plugin")


def _parse(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


class _RpoCollector(Collector):
    """RPO age (now minus the newest successful backup's start) and its objective, per set, at scrape time."""

    def __init__(self) -> None:
        self.last_success: dict[str, float] = {}  # set -> start time of its newest successful backup
        self.objective: dict[str, float] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "drtool_rpo_age_seconds",
            "Age of the newest successful backup of the set (data loss if lost now)",
            labels=_SET,
        )
        objective = GaugeMetricFamily("drtool_rpo_objective_seconds", "RPO objective of the set", labels=_SET)
        now = time.time()
        with self._lock:
            for name, started in sorted(self.last_success.items()):
                age.add_metric([name], now - started)
            for name, seconds in sorted(self.objective.items()):
                objective.add_metric([name], seconds)
        yield age
        yield objective


class BackupMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rpo = _RpoCollector()
        r.register(self.rpo)
        self.last_success = Gauge(
            "drtool_backup_last_success_timestamp_seconds", "End of the newest successful backup", _SET, registry=r
        )
        self.last_run = Gauge("drtool_backup_last_run_timestamp_seconds", "End of the newest run", _SET, registry=r)
        self.duration = Gauge("drtool_backup_duration_seconds", "Duration of the newest run", _SET, registry=r)
        self.runs = Counter("drtool_backup_runs", "Backup runs by result", ("set", "result"), registry=r)
        self.failures = Counter("drtool_backup_failures", "Failed backup runs by reason", ("set", "reason"), registry=r)
        self.bytes_read = Counter("drtool_backup_read_bytes", "Bytes read from sources", _SET, registry=r)
        self.bytes_stored = Counter(
            "drtool_backup_stored_bytes", "Bytes written to the store (new chunks)", _SET, registry=r
        )
        self.chunks = Counter("drtool_backup_chunks", "Chunks cut", _SET, registry=r)
        self.chunks_dedup = Counter(
            "drtool_backup_chunks_deduplicated", "Chunks already in the store", _SET, registry=r
        )
        self.plugin_last_success = Gauge(
            "drtool_plugin_last_success_timestamp_seconds",
            "End of the plugin's newest successful backup",
            _SET_PLUGIN,
            registry=r,
        )
        self.plugin_duration = Gauge(
            "drtool_plugin_duration_seconds", "Duration of the plugin's part of the newest run", _SET_PLUGIN, registry=r
        )
        self.plugin_bytes = Gauge(
            "drtool_plugin_read_bytes", "Bytes the plugin wrote in the newest run", _SET_PLUGIN, registry=r
        )
        self.plugin_artifacts = Gauge(
            "drtool_plugin_artifacts", "Artifacts the plugin wrote in the newest run", _SET_PLUGIN, registry=r
        )
        self.plugin_failures = Counter("drtool_plugin_failures", "Plugin failures", _SET_PLUGIN, registry=r)
        self.pruned = Counter("drtool_prune_forgotten_backups", "Backups forgotten by prune", _SET, registry=r)
        self.chunks_deleted = Counter("drtool_prune_deleted_chunks", "Chunks deleted by prune", _SET, registry=r)
        self.locked = Gauge("drtool_prune_locked_objects", "Objects prune kept for Object Lock", _SET, registry=r)
        self.store_free = Gauge(
            "drtool_store_free_bytes", "Free space where a local store lives", ("store",), registry=r
        )

    def declare(self, name: str, rpo_seconds: float | None) -> None:
        """Make a set's series exist from the start (an absent series cannot alert)."""
        if rpo_seconds is not None:
            with self.rpo._lock:
                self.rpo.objective[name] = rpo_seconds
        self.runs.labels(name, "ok")
        self.runs.labels(name, "failed")

    def seen_backup(self, name: str, started: str, finished: str) -> None:
        """Feed the RPO clock from a complete backup (found in the store at start-up, or just made)."""
        with self.rpo._lock:
            if _parse(started) <= self.rpo.last_success.get(name, 0.0):
                return
            self.rpo.last_success[name] = _parse(started)
        self.last_success.labels(name).set(_parse(finished))

    def record_success(self, name: str, manifest: Manifest, duration: float) -> None:
        stats = manifest.stats
        self.last_run.labels(name).set(time.time())
        self.duration.labels(name).set(duration)
        self.runs.labels(name, "ok" if manifest.status == "complete" else "failed").inc()
        self.bytes_read.labels(name).inc(stats.get("bytes_read", 0))
        self.bytes_stored.labels(name).inc(stats.get("bytes_stored", 0))
        self.chunks.labels(name).inc(stats.get("chunks", 0))
        self.chunks_dedup.labels(name).inc(stats.get("chunks", 0) - stats.get("chunks_new", 0))
        for plugin, outcome in manifest.plugins.items():
            arts = manifest.artifacts_of(plugin)
            self.plugin_duration.labels(name, plugin).set(_parse(outcome.finished) - _parse(outcome.started))
            self.plugin_bytes.labels(name, plugin).set(sum(a.size for a in arts))
            self.plugin_artifacts.labels(name, plugin).set(len(arts))
            if outcome.status == "ok":
                self.plugin_last_success.labels(name, plugin).set(_parse(outcome.finished))
            else:
                self.plugin_failures.labels(name, plugin).inc()
        if manifest.status == "partial":
            self.failures.labels(name, "PartialBackup").inc()
        if manifest.status == "complete":
            self.seen_backup(name, manifest.started, manifest.finished)

    def record_failure(self, name: str, reason: str, duration: float) -> None:
        self.last_run.labels(name).set(time.time())
        self.duration.labels(name).set(duration)
        self.runs.labels(name, "failed").inc()
        self.failures.labels(name, reason).inc()

    def record_prune(self, name: str, report: PruneReport) -> None:
        self.pruned.labels(name).inc(len(report.forgotten))
        self.chunks_deleted.labels(name).inc(report.chunks_deleted)
        self.locked.labels(name).set(len(report.locked_objects))

    def record_store(self, url: str) -> None:
        """Free bytes of a local store's filesystem (an S3 store's capacity is the S3 server's to report)."""
        if "://" not in url and os.path.isdir(url):
            st = os.statvfs(url)
            self.store_free.labels(url).set(st.f_bavail * st.f_frsize)

    # --- exposition -------------------------------------------------------------------------------

    def serve(self, address: str) -> None:
        """HTTP /metrics on ``host:port`` (a daemon thread; ends with the process)."""
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)

    def write_textfile(self, path: str) -> None:
        write_to_textfile(path, self.registry)  # atomic: written to a temp file, then renamed

    def push(self, gateway: str, job: str, grouping: Mapping[str, str]) -> None:
        push_to_gateway(gateway, job=job, registry=self.registry, grouping_key=dict(grouping))
