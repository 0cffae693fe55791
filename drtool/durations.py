"""Durations as people write them in plans and config files (``90s``, ``15m``, ``1h30m``, ``2d``), and back.

Plans, backup sets, retention and the config file all take durations: the one grammar lives here, below
all of them, so none of them imports another to read a ``timeout:``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")


def parse_duration(value: Any) -> dt.timedelta:
    """``90s``, ``15m``, ``1h30m``, ``2d``, or a number of seconds."""
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return dt.timedelta(seconds=value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match and any(match.groups()):
            d, h, m, s = (int(g or 0) for g in match.groups())
            return dt.timedelta(days=d, hours=h, minutes=m, seconds=s)
    raise ValueError(f"{value!r} is not a duration (write e.g. 90s, 15m, 1h30m, 2d)")


Duration = Annotated[dt.timedelta, BeforeValidator(parse_duration)]


def format_duration(value: dt.timedelta | float) -> str:
    """The inverse of ``parse_duration`` for reports: ``1h02m``, ``4m05s``, ``12.3s``."""
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
