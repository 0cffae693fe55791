"""A drill that resumed training records its RPO in steps (``rpo_steps``) and the matrix shows them beside
the RPO in time: in the JSON rows, the terminal table and the HTML page (records through a real catalog)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from drtool.catalog import Catalog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.drills import matrix


def test_the_matrix_shows_the_training_steps_a_drill_lost(tmp_path: Path) -> None:
    log = ScenarioLog(Catalog(str(tmp_path / "catalog.db")))
    facts = {"recovery_step": 20, "torn_steps": [30], "steps_lost_at_least": 10}
    log.save(
        ScenarioDrillRow(
            id="run-1", scenario="checkpoint-store-down", plan_name="training-resume", target="127.0.0.1", ok=True,
            injected_at="2026-12-05T11:00:00.000000Z", rpo_s=95.0, rpo_steps=10, time_to_service_s=120.0,
            checks=json.dumps([{"name": "training-resumes", "ok": True, "detail": "resumed", "facts": facts}]),
        )
    )  # fmt: skip
    (saved,) = log.all()
    assert saved.to_dict()["checks"][0]["facts"] == facts  # what `drtool audit`'s resume-drilled item reads
    rows = {r["scenario"]: r for r in matrix.rows(log.all(), [])}
    assert rows["checkpoint-store-down"]["last"]["rpo_steps"] == 10
    assert rows["certs-dns-lost"]["last"] is None
    console = Console(width=200, record=True)
    console.print(matrix.table(list(rows.values())))
    assert "1m35s, 10 steps" in console.export_text()
    assert "1m35s, 10 steps</td>" in matrix.to_html(list(rows.values()), "now")
