"""The drill matrix: every scenario against its latest drill, with that drill's age, for a terminal, JSON,
HTML and Prometheus (``drtool_drill_last_age_seconds`` and ``drtool_drill_last_result`` per scenario, so an
alert fires when a drill is overdue or failed; a scenario never drilled has result -1 and no age)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from rich.table import Table

from drtool.catalog.runs import DrillRow
from drtool.catalog.scenarios import ScenarioDrillRow
from drtool.durations import format_duration
from drtool.report.render import env
from drtool.report.svg import COLOURS

from .scenarios import SCENARIOS

WHOLE_CLUSTER = "whole-cluster-lost"


def _when(stamp: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def rows(
    drills: Sequence[ScenarioDrillRow], rehearsals: Sequence[DrillRow], now: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """One row per scenario: what it is, and its latest drill (``None`` when never drilled)."""
    now = now or dt.datetime.now(dt.UTC)
    latest: dict[str, dict[str, Any]] = {}
    for d in sorted(drills, key=lambda d: d.injected_at):
        latest[d.scenario] = {
            "at": d.injected_at,
            "ok": d.ok,
            "plan": d.plan_name,
            "rpo_s": d.rpo_s,
            "rpo_steps": d.rpo_steps,
            "time_to_service_s": d.time_to_service_s,
            "id": d.id,
        }
    for r in sorted(rehearsals, key=lambda r: r.started):
        latest[WHOLE_CLUSTER] = {
            "at": r.started,
            "ok": r.ok,
            "plan": r.plan_name,
            "rpo_s": r.rpo_s,
            "rpo_steps": None,
            "time_to_service_s": r.rto_s,
            "id": r.id,
        }
    out = []
    for name, s in SCENARIOS.items():
        last = latest.get(name)
        if last is not None:
            last["age_s"] = round((now - _when(last["at"])).total_seconds(), 1)
        out.append(
            {
                "scenario": name,
                "injected": s.injected,
                "recovered_by": s.recovered_by,
                "judged_by": s.judged_by,
                "runnable": s.runnable,
                "last": last,
            }
        )
    return out


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def table(matrix: list[dict[str, Any]]) -> Table:
    out = Table(
        "scenario", "recovered by", "last drill", "age", "RPO", "time to service", "result", title="drill matrix"
    )
    for r in matrix:
        last = r["last"]
        if last is None:
            out.add_row(r["scenario"], r["recovered_by"], "never", "-", "-", "-", "[yellow]never drilled[/]")
            continue
        result = "[green]ok[/]" if last["ok"] else "[red]failed[/]"
        out.add_row(
            r["scenario"],
            r["recovered_by"],
            last["at"][:19],
            _duration(last["age_s"]),
            _duration(last["rpo_s"]) + (f", {last['rpo_steps']} steps" if last["rpo_steps"] is not None else ""),
            _duration(last["time_to_service_s"]),
            result,
        )
    return out


def to_html(matrix: list[dict[str, Any]], generated: str) -> str:
    return env.get_template("drills.html").render(
        matrix=matrix, generated=generated, duration=_duration, colours=COLOURS
    )


def registry(matrix: list[dict[str, Any]]) -> CollectorRegistry:
    reg = CollectorRegistry()
    age = Gauge("drtool_drill_last_age_seconds", "Age of the scenario's latest drill", ("scenario",), registry=reg)
    result = Gauge(
        "drtool_drill_last_result",
        "The scenario's latest drill: 1 ok, 0 failed, -1 never drilled",
        ("scenario",),
        registry=reg,
    )
    for r in matrix:
        last = r["last"]
        result.labels(r["scenario"]).set(-1 if last is None else int(last["ok"]))
        if last is not None:
            age.labels(r["scenario"]).set(last["age_s"])
    return reg
