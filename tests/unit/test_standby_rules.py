"""The standby's alert rules (manifests/monitoring/standby-rules.yaml) name only series `drtool standby`
exports (drtool/standby/metrics.py), and the lag it exports is the store-time gap it was given."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest

from drtool.standby.metrics import StandbyMetrics

RULES = Path(__file__).resolve().parents[2] / "manifests" / "monitoring" / "standby-rules.yaml"


def _exported() -> tuple[set[str], str]:
    metrics = StandbyMetrics()
    applied = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    metrics.positions("prod", applied, applied + dt.timedelta(seconds=42))
    metrics.applied.labels("prod").inc()
    metrics.skipped.labels("prod").inc()
    metrics.held.labels("prod").set(3)
    metrics.fenced.labels("prod").set(0)
    text = generate_latest(metrics.registry).decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    return names, text


def test_every_rule_names_an_exported_series() -> None:
    rule = yaml.safe_load(RULES.read_text())
    assert rule["kind"] == "PrometheusRule"
    names, _ = _exported()
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    used = {m for e in exprs for m in re.findall(r"drtool_standby_[a-z_]+", e)}
    assert used and used <= names, used - names
    assert any("drtool_standby_lag_seconds" in e for e in exprs)


def test_lag_is_the_store_time_gap() -> None:
    _, text = _exported()
    assert 'drtool_standby_lag_seconds{set="prod"} 42.0' in text
