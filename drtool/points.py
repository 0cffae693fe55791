"""Where to restore to: a point of a source's history (a log position, a time, or the newest there is).

The store's delta chains (``drtool.repo.chains``) pick the backups that reach a point, and a plugin's
restore replays up to it: one vocabulary below both, so the store needs nothing from the plugin contract.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from drtool.errors import UsageError

LATEST = "latest"


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 / RFC 3339 time as an aware UTC datetime (a time without offset is taken as UTC)."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.astimezone(dt.UTC) if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True)
class Point:
    """Where to restore to: a log position (etcd revision), a time, or the newest point the store holds."""

    position: int | None = None
    time: dt.datetime | None = None

    @property
    def latest(self) -> bool:
        return self.position is None and self.time is None

    @classmethod
    def parse(cls, text: str | int) -> Point:
        """``latest``, an integer (a position: an etcd revision), or an RFC 3339 / ISO 8601 time (UTC if
        no offset is given)."""
        raw = str(text).strip()
        if raw == LATEST:
            return cls()
        if raw.isdigit():
            return cls(position=int(raw))
        try:
            return cls(time=parse_time(raw))
        except ValueError:
            raise UsageError(
                f"--at {raw!r} is neither a revision, a time nor 'latest'",
                "for example --at 18342, --at 2026-12-01T14:05:00Z or --at latest",
            ) from None

    def describe(self) -> str:
        if self.position is not None:
            return f"revision {self.position}"
        return f"{self.time:%Y-%m-%dT%H:%M:%SZ}" if self.time else LATEST

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "time": f"{self.time:%Y-%m-%dT%H:%M:%S.%fZ}" if self.time else None}
