"""Catalog table for scenario drills (`drtool drill`): one failure injected, recovered and judged, with its
actual RPO and time to service (docs/drills.md).

A rehearsal's whole-cluster drill stays in ``runs.DrillRow``; a scenario drill records more: when the
failure was injected, seen and recovered, steps of training lost where they apply, and what a person did.
Lists (steps, checks, manual actions) are JSON text. No secrets: targets are not stored.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlmodel import Field, Session, SQLModel, select

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog


class ScenarioDrillRow(SQLModel, table=True):
    __tablename__ = "scenario_drills"
    id: str = Field(primary_key=True)
    scenario: str = Field(index=True)
    plan_name: str
    target: str  # the API server drilled (its host), never credentials
    ok: bool  # recovered and every check green
    injected_at: str
    detected_at: str | None = None
    recovered_at: str | None = None  # the plan's steps done
    in_service_at: str | None = None  # the plan's checks green
    rpo_s: float | None = None  # data lost, in time
    rpo_steps: int | None = None  # training steps lost, where the scenario has training
    time_to_service_s: float | None = None  # injected to in service
    steps: str = "[]"  # JSON: [{id, status, seconds}]
    checks: str = "[]"  # JSON: [{name, ok, detail}]
    manual: str = "[]"  # JSON: what a person had to do, in words
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = self.model_dump()
        for key in ("steps", "checks", "manual"):
            out[key] = json.loads(out[key])
        return out


class ScenarioLog:
    def __init__(self, catalog: Catalog) -> None:
        self.engine = catalog.engine

    def save(self, row: ScenarioDrillRow) -> None:
        with Session(self.engine) as session:
            session.merge(row)
            session.commit()

    def all(self) -> list[ScenarioDrillRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(ScenarioDrillRow).order_by(ScenarioDrillRow.injected_at)).all())
