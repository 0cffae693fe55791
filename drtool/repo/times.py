"""Backup times checked against the store's own clock.

A manifest states when its backup started and finished; anyone holding the key (the CronJob's key file)
can write one with any times, and `latest`, `latest-before` and retention all go by them. What a writer
cannot choose is when the store received the object: S3 sets ``LastModified`` (the first version of the same
bytes counts), a filesystem the file's birth time (drtool/backends/birth.py), which no ``chmod``, ``touch``
or rename moves. A genuine backup writes its manifest right after it finishes, so its stated finish is within
the clocks' skew of that server time; a manifest dated into the future or the past is not. Such a manifest
is *flagged*: listed with the reason, never chosen by `latest`/`latest-before`, counted by no retention
rule and never forgotten by one (docs/threat-model.md, "Forged backup times").

What this cannot catch: a key holder who writes a manifest *now* with honest times. See the threat model.
"""

from __future__ import annotations

import datetime as dt

from drtool.points import parse_time

DEFAULT_MAX_SKEW = dt.timedelta(minutes=5)


def id_time(backup_id: str) -> dt.datetime:
    """When a backup started, from its id (``20261129T104500Z-1a2b3c``)."""
    return dt.datetime.strptime(backup_id.split("-")[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)


def id_second(backup_id: str) -> str:
    """The second a backup id was made in: ids of one second sort by their random suffix, not by time."""
    return backup_id.split("-", 1)[0]


def newness(backup_id: str, finished: str, started: str) -> tuple[str, str, str, str]:
    """A sort key, newer last: by the second of the id, then, within one second (two backups a second apart in
    a loop, or a follower's deltas), by when the backup finished and started."""
    return (id_second(backup_id), finished, started, backup_id)


def suspicion(
    backup_id: str,
    started: str,
    finished: str,
    stored: dt.datetime | None,
    max_skew: dt.timedelta = DEFAULT_MAX_SKEW,
    chain_time: str | None = None,
) -> str | None:
    """Why a manifest's stated times cannot be believed, or None. ``stored``: when the store received it
    (None when unknown: nothing is flagged). ``chain_time``: a chain link's ``last_time``."""
    if stored is None:
        return None
    start, finish = parse_time(started), parse_time(finished)
    if finish - stored > max_skew:
        later = _span(finish - stored)
        return f"dated in the future: it says it finished at {_at(finish)}, {later} after the store received it"
    if stored - finish > max_skew:
        return (
            f"back-dated: the store received it at {_at(stored)}, {_span(stored - finish)} after the finish time "
            f"it states ({_at(finish)})"
        )
    if max(start, id_time(backup_id)) - finish > max_skew:
        return f"it says it started after it finished ({_at(finish)})"
    if chain_time is not None and parse_time(chain_time) - finish > max_skew:
        return f"its chain position is dated after it finished ({_at(finish)})"
    return None


def _at(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
