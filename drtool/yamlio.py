"""Reading YAML that people write (config, plans, values files), bounded in size, depth and expansion.

A hostile or broken file must end in one clean line, never a traceback: PyYAML recurses per nesting level,
so a few thousand ``[`` exhaust the stack, and nothing a person writes by hand is megabytes long. Aliases
(``*name``) are refused outright: nine nested aliases of nine items each make a 370-byte plan expand to
hundreds of thousands of nodes ("billion laughs"), and no drtool file needs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from drtool.errors import UsageError

MAX_BYTES = 4 * 1024 * 1024


class Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (and so merge keys, ``<<: *name``, which need one)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"found alias *{event.anchor}: aliases are not allowed (write the value out)",
                event.start_mark,
            )  # fmt: skip
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


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
        problem = getattr(exc, "problem", None)
        raise UsageError(
            f"{what} {path}{where} is not valid YAML" + (f": {problem}" if problem else ""), "fix the file"
        ) from None
    except RecursionError:
        raise UsageError(f"{what} {path} is nested too deeply", "fix the file") from None


def loads(text: str | bytes) -> Any:
    """One YAML document from memory (a Secret's kubeconfig, an MLmodel file, a chart index) with the same
    refusals; PyYAML's errors are the caller's to turn into its own."""
    return yaml.load(text, Loader=Loader)  # a SafeLoader


def load(path: Path, what: str) -> Any:
    with parse_errors(what, path):
        return loads(read_text(path, what))
