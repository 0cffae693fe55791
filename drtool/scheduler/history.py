"""The scheduler's run history in the catalog database: what `drtool schedule list` shows as the last result.

Unlike the backup tables this is not rebuilt from the store: a failed run leaves no manifest, and knowing
that the last three runs failed (and why) is the point. It holds no secrets.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, select


class ScheduleRunRow(SQLModel, table=True):
    __tablename__ = "schedule_runs"
    id: int | None = Field(default=None, primary_key=True)
    backup_set: str = Field(index=True)
    started: str = Field(index=True)
    finished: str
    status: str  # ok | partial | failed | interrupted
    backup_id: str = ""
    reason: str = ""  # error class for failures (StoreUnavailable, SourceError, ...)
    error: str = ""
    forgotten: int = 0
    chunks_deleted: int = 0
    prune_note: str = ""  # why prune did not run or what it kept for Object Lock


class RunHistory:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        SQLModel.metadata.create_all(engine, tables=[ScheduleRunRow.__table__])  # type: ignore[attr-defined]

    def record(self, row: ScheduleRunRow) -> None:
        with Session(self.engine) as session:
            session.add(row)
            session.commit()

    def last(self, backup_set: str) -> ScheduleRunRow | None:
        with Session(self.engine) as session:
            query = (
                select(ScheduleRunRow)
                .where(ScheduleRunRow.backup_set == backup_set)
                .order_by(ScheduleRunRow.started.desc(), ScheduleRunRow.id.desc())  # type: ignore[attr-defined,union-attr]
            )
            return session.exec(query).first()

    def runs(self, backup_set: str | None = None) -> list[ScheduleRunRow]:
        with Session(self.engine) as session:
            query = select(ScheduleRunRow).order_by(ScheduleRunRow.id)
            if backup_set is not None:
                query = query.where(ScheduleRunRow.backup_set == backup_set)
            return list(session.exec(query).all())
