"""Prometheus series of a standby (docs/standby.md, "Metrics"): its lag, computed at scrape time.

``drtool_standby_lag_seconds``: store time of the newest link of the set in the store minus that of the
newest link applied (0 when caught up): how far behind the store the standby is.
``drtool_standby_age_seconds``: now minus the store time of the newest link applied: it grows when the
follower on the primary stops too, so an alert on it fires when either side stops. The alert rules are in
manifests/monitoring/standby-rules.yaml.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_SET = ("set",)


class _LagCollector(Collector):
    def __init__(self) -> None:
        self.applied: dict[str, float] = {}  # set -> store time of the newest applied link
        self.newest: dict[str, float] = {}  # set -> store time of the newest link in the store
        self.lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "drtool_standby_lag_seconds", "Store time of the set's newest link minus the newest applied", labels=_SET
        )
        age = GaugeMetricFamily(
            "drtool_standby_age_seconds", "Now minus the store time of the newest link applied", labels=_SET
        )
        now = time.time()
        with self.lock:
            for name, applied in sorted(self.applied.items()):
                lag.add_metric([name], max(0.0, self.newest.get(name, applied) - applied))
                age.add_metric([name], now - applied)
        yield lag
        yield age


class StandbyMetrics:
    """One per process, on its own registry (like drtool/metrics.py)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._lag = _LagCollector()
        self.registry.register(self._lag)
        self.applied = Counter(
            "drtool_standby_links_applied", "Chain links applied to the standby", _SET, registry=self.registry
        )
        self.skipped = Counter(
            "drtool_standby_links_skipped",
            "Links or manifests skipped: not authentic, or fenced",
            _SET,
            registry=self.registry,
        )
        self.held = Gauge(
            "drtool_standby_held_deletions", "Deletions held back until --delete-after", _SET, registry=self.registry
        )
        self.fenced = Gauge(
            "drtool_standby_fenced", "1 once the set was fenced by a failover", _SET, registry=self.registry
        )
        self.polled = Gauge(
            "drtool_standby_last_poll_timestamp_seconds",
            "When the standby last read the store",
            _SET,
            registry=self.registry,
        )

    def positions(self, name: str, applied: dt.datetime | None, newest: dt.datetime | None) -> None:
        with self._lag.lock:
            if applied is not None:
                self._lag.applied[name] = applied.timestamp()
            if newest is not None:
                self._lag.newest[name] = newest.timestamp()
        self.polled.labels(name).set(time.time())

    def lag(self, name: str) -> float | None:
        """The lag in seconds as a scrape would see it now (None before the first applied link)."""
        with self._lag.lock:
            applied = self._lag.applied.get(name)
            return None if applied is None else max(0.0, self._lag.newest.get(name, applied) - applied)

    def serve(self, address: str) -> None:
        """HTTP /metrics on ``host:port`` (a daemon thread; ends with the process)."""
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)
