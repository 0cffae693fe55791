"""Reading YAML that people write (config, plans, values files), bounded in size and depth.

A hostile or broken file must end in one clean line, never a traceback: PyYAML recurses per nesting level,
so a few thousand ``[`` exhaust the stack, and nothing a person writes by hand is megabytes long.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from drtool.errors import UsageError

MAX_BYTES = 4 * 1024 * 1024


def read_text(path: Path, what: str) -> str:
    """The file's text, refused when it is too large or not UTF-8."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise UsageError(f"{what} {path} is {size} bytes, over the {MAX_BYTES}-byte limit", "is it the right file?")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text", "is it the right file?") from None


@contextmanager
def parse_errors(what: str, path: Path) -> Iterator[None]:
    """Turn PyYAML's failures (syntax, and too-deep nesting) into one-line usage errors."""
    try:
        yield
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UsageError(f"{what} {path}{where} is not valid YAML", "fix the file") from None
    except RecursionError:
        raise UsageError(f"{what} {path} is nested too deeply", "fix the file") from None


def load(path: Path, what: str) -> Any:
    with parse_errors(what, path):
        return yaml.safe_load(read_text(path, what))
