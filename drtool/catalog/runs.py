"""Catalog tables for restore runs, their steps, rehearsal drills and standby failovers: the history an operator keeps.

Unlike the backup tables these are not rebuilt from the store: they record what happened on this side
(timings, logs, outcomes). They hold no secrets: targets are not stored, only the plan's path and hash,
so a resumed run reads its targets again from the plan and the environment.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlmodel import Field, Session, SQLModel, select

from drtool.errors import NotFound, UsageError

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog


class RestoreRunRow(SQLModel, table=True):
    __tablename__ = "restore_runs"
    id: str = Field(primary_key=True)
    kind: str = "restore"  # restore | rehearsal
    plan_name: str
    plan_path: str
    plan_sha256: str
    values_path: str = ""
    store_id: str = Field(index=True)
    backup_id: str
    started: str = Field(index=True)
    finished: str = ""
    status: str = "running"  # running | ok | failed | awaiting-approval
    resumed_from: str = ""


class StepRunRow(SQLModel, table=True):
    __tablename__ = "step_runs"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="restore_runs.id")
    step_id: str
    uses: str
    status: str  # waiting | awaiting-approval | running | ok | failed | refused | skipped | declined
    attempts: int = 0
    started_s: float = 0.0  # seconds from the run's start
    finished_s: float = 0.0
    changed: bool = False
    summary: str = ""
    error: str = ""
    log: str = ""
    done_in: str = ""  # status ok: the run it was done in (this one, or an earlier one a resume took it from)


class ApprovalRow(SQLModel, table=True):
    """Who decided about a gated step of a run, when, from where and how (drtool.plans.approval)."""

    __tablename__ = "approvals"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="restore_runs.id")
    step_id: str
    approved: bool
    approver: str  # --approver, else the OS user
    os_user: str
    host: str
    at: str
    how: str  # --approve | --approve-all | prompt | automatic (rehearsal)


class DrillRow(SQLModel, table=True):
    __tablename__ = "drills"
    id: str = Field(primary_key=True)  # the rehearsal's run id
    started: str = Field(index=True)
    plan_name: str
    backup_id: str
    target: str
    ok: bool  # restored and verified within the objectives, nothing refused (independence: its own column)
    rto_s: float
    rto_objective_s: float | None = None
    rto_met: bool | None = None
    rpo_s: float | None = None
    rpo_objective_s: float | None = None
    rpo_met: bool | None = None
    independence: str = ""  # the analysis' verdict, or "not analysed"
    refused_connections: int = 0
    report: str = ""  # path of the written report


class FailoverRow(SQLModel, table=True):
    """A standby failover or failback (docs/standby.md): what it measured, and where its report is."""

    __tablename__ = "failovers"
    id: str = Field(primary_key=True)  # set and start time
    started: str = Field(index=True)
    backup_set: str
    kind: str  # failover | failback
    forced: bool
    ok: bool  # every check held
    rpo_s: float | None = None  # failure time minus the newest change applied
    rto_s: float  # command start to service (the last check green)
    report: str = ""  # path of the written report


def upgrade(engine: Engine) -> None:
    """Add what later drtool versions record to run tables made by earlier ones (``create_all`` does not).

    ``step_runs.done_in`` (0.2): filled for old rows from what they said, so an old run can still be resumed.
    """
    if "done_in" in {c["name"] for c in inspect(engine).get_columns("step_runs")}:
        return
    prefix = "done in run "
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE step_runs ADD COLUMN done_in VARCHAR NOT NULL DEFAULT ''"))
        conn.execute(text("UPDATE step_runs SET done_in = run_id WHERE status = 'ok' AND attempts > 0"))
        conn.execute(
            text(
                "UPDATE step_runs SET done_in = SUBSTR(summary, :start) "
                "WHERE status = 'ok' AND attempts = 0 AND summary LIKE :pattern"
            ),
            {"start": len(prefix) + 1, "pattern": prefix + "%"},
        )


@dataclasses.dataclass
class ResumePoint:
    """What `drtool restore --resume RUN` takes over from the run it continues."""

    run_id: str
    plan_path: str
    plan_sha256: str  # the plan as that run read it: a resume of an edited plan is refused
    values_path: str
    backup_id: str
    done_before: dict[str, str]  # step id -> the run it ended ok in
    elapsed_s: float  # since the first run of the resume chain started: the RTO spent so far


class RunLog:
    """Reads and writes the run tables through a ``Catalog``'s engine."""

    def __init__(self, catalog: Catalog) -> None:
        self.engine = catalog.engine

    def save(self, *rows: SQLModel) -> None:
        with Session(self.engine) as session:
            for row in rows:
                session.merge(row)
            session.commit()

    def replace_steps(self, run_id: str, steps: list[StepRunRow]) -> None:
        """The run's step rows as they are now (a resumed run keeps its own rows, the old run its own)."""
        with Session(self.engine) as session:
            for old in session.exec(select(StepRunRow).where(StepRunRow.run_id == run_id)).all():
                session.delete(old)
            session.add_all(steps)
            session.commit()

    def run(self, run_id: str) -> RestoreRunRow:
        with Session(self.engine) as session:
            row = session.get(RestoreRunRow, run_id)
            if row is None:
                matches = session.exec(select(RestoreRunRow).where(RestoreRunRow.id.startswith(run_id))).all()  # type: ignore[attr-defined]
                if len(matches) == 1:
                    return matches[0]
                raise NotFound(f"no restore run {run_id!r} in the catalog", "`drtool restore --plan` prints its run id")
            return row

    def steps(self, run_id: str) -> list[StepRunRow]:
        with Session(self.engine) as session:
            query = select(StepRunRow).where(StepRunRow.run_id == run_id).order_by(StepRunRow.started_s)
            return list(session.exec(query).all())

    def resume_point(self, run_id: str) -> ResumePoint:
        """Where a resume of restore run ``run_id`` starts from (a rehearsal is run again, not resumed)."""
        previous = first = self.run(run_id)
        if previous.kind != "restore":
            raise UsageError(f"run {previous.id} was a {previous.kind}, not a restore", "rehearse the plan again")
        while first.resumed_from:
            first = self.run(first.resumed_from)
        began = dt.datetime.fromisoformat(first.started.replace("Z", "+00:00"))
        return ResumePoint(
            previous.id,
            previous.plan_path,
            previous.plan_sha256,
            previous.values_path,
            previous.backup_id,
            {step.step_id: step.done_in for step in self.steps(previous.id) if step.status == "ok"},
            (dt.datetime.now(dt.UTC) - began).total_seconds(),
        )

    def approvals(self, run_id: str) -> list[ApprovalRow]:
        with Session(self.engine) as session:
            query = select(ApprovalRow).where(ApprovalRow.run_id == run_id).order_by(ApprovalRow.at)
            return list(session.exec(query).all())

    def runs(self, limit: int = 20) -> list[RestoreRunRow]:
        """The latest runs, newest first."""
        with Session(self.engine) as session:
            query = select(RestoreRunRow).order_by(RestoreRunRow.started.desc()).limit(limit)  # type: ignore[attr-defined]
            return list(session.exec(query).all())

    def drills(self) -> list[DrillRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(DrillRow).order_by(DrillRow.started)).all())

    def failovers(self) -> list[FailoverRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(FailoverRow).order_by(FailoverRow.started)).all())
