"""Coercing the values of the mappings drtool hands a plugin (source, target, options).

Values come from a YAML config (lists, booleans, numbers) or from ``-t KEY=VALUE`` / ``-o KEY=VALUE`` on
the command line (strings), so every list also accepts a comma-separated string and every flag a
"true"/"false" string. A value that is neither is a usage error, never a silent default: ``dry_run=maybe``
must not write.
"""

from __future__ import annotations

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
