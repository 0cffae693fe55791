"""Coercing the values of the mappings drtool hands a plugin (source, target, options).

Values come from a YAML config (lists, booleans, numbers) or from ``-t KEY=VALUE`` / ``-o KEY=VALUE`` on
the command line (strings), so every list also accepts a comma-separated string and every flag a
"true"/"false" string. A value that is neither is a usage error, never a silent default: ``dry_run=maybe``
must not write.
"""

from __future__ import annotations

import re
from typing import Any

from drtool.errors import UsageError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def as_list(value: Any) -> list[str]:
    """A list of strings from a list or a comma-separated string; ``None`` and ``""`` are empty."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v).strip() for v in value]


def as_bool(value: Any, default: bool = False) -> bool:
    """A flag from a boolean or one of ``TRUE``/``FALSE`` (any case); ``None`` and ``""`` give ``default``."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE:
            return True
        if word in FALSE:
            return False
        raise UsageError(f"expected true or false, got {value!r}")
    return bool(value)


def as_number(value: Any, default: float, name: str) -> float:
    """A number from a number or a numeric string; ``None`` and ``""`` give ``default``."""
    try:
        return default if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number, got {value!r}") from None


def as_count(value: Any, default: int, name: str, minimum: int = 1) -> int:
    """A whole number of at least ``minimum`` from an int or a digit string; ``None`` and ``""`` give
    ``default``. ``2.5`` or ``0`` workers is a usage error, not something rounded or clamped."""
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())):
        raise UsageError(f"{name} must be a whole number, got {value!r}")
    if int(value) < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)


_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def as_size(value: Any, default: int, name: str) -> int:
    """A positive byte count from an int or a string such as ``8MiB``, ``512 KiB``, ``1GiB`` (binary units
    only: ``8MB`` is refused rather than guessed at); ``None`` and ``""`` give ``default``."""
    if value is None or value == "":
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value) if isinstance(value, str) else None
    if match is None or match[2].lower() not in _UNITS or int(match[1]) == 0:
        raise UsageError(f"{name} must be a size such as 8MiB, 512KiB or 1GiB, got {value!r}")
    return int(match[1]) * _UNITS[match[2].lower()]
