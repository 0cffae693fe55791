"""A backup set: what to back up (plugins and their sources), when, how long to keep it, and the RPO promised.

Declared under ``backup_sets:`` in the config file (docs/scheduling.md). The model is strict: an unknown key
is an error, because a misspelt ``retention`` key would silently keep (or lose) backups.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drtool.durations import Duration, format_duration
from drtool.errors import UsageError
from drtool.retention import RetentionPolicy


class BackupSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plugins: list[str] = Field(min_length=1)
    sources: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per plugin; overrides top-level sources
    cron: str | None = None  # five crontab fields, UTC
    interval: Duration | None = None
    jitter: Duration = dt.timedelta(0)  # random delay added to each run, so sets do not all start together
    misfire_grace: Duration = dt.timedelta(minutes=10)  # a run missed by less than this still happens
    rpo: Duration | None = None  # objective: the newest successful backup should never be older than this
    # whose objective that rpo is: the guide sets training's and inference's apart (`drtool audit`, docs/audit.md)
    workload: Literal["training", "inference"] | None = None
    retention: RetentionPolicy = Field(default_factory=RetentionPolicy)
    tags: list[str] = Field(default_factory=list)
    # continuous backup (`drtool follow --set NAME`, docs/etcd.md): the plugin's follow options, e.g.
    # {period: 20}; such a set has no cron/interval and the scheduler leaves it to its follower
    follow: dict[str, Any] | None = None

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is not None:
            from apscheduler.triggers.cron import CronTrigger

            CronTrigger.from_crontab(value, timezone="UTC")  # raises ValueError naming the bad field
        return value

    @model_validator(mode="after")
    def _one_schedule(self) -> BackupSet:
        if self.follow is not None:
            if self.cron is not None or self.interval is not None or len(self.plugins) != 1:
                raise ValueError("a `follow` set has one plugin and no `cron` or `interval`")
            return self
        if (self.cron is None) == (self.interval is None):
            raise ValueError("give exactly one of `cron` or `interval`")
        if self.interval is not None and self.interval.total_seconds() <= 0:
            raise ValueError("`interval` must be positive")
        return self

    def schedule_text(self) -> str:
        if self.follow is not None:
            return "continuous (drtool follow)"
        return f"cron {self.cron}" if self.cron else f"every {format_duration(self.interval)}"

    def sources_for(self, defaults: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each plugin's source settings: the set's own, else the config's top-level ``sources``."""
        return {name: dict(self.sources.get(name, defaults.get(name, {}))) for name in self.plugins}


def parse_backup_sets(raw: Any, where: str) -> dict[str, BackupSet]:
    """The ``backup_sets:`` mapping of a config file; errors name the set and the field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"`backup_sets` in {where} must map set names to settings", "see docs/scheduling.md")
    out = {}
    for name, body in raw.items():
        try:
            out[str(name)] = BackupSet.model_validate(body or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(set)"
            raise UsageError(
                f"backup set {name!r} in {where}: {field}: {first['msg']}", "see docs/scheduling.md"
            ) from None
    return out
