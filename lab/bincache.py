"""The per-user cache of built lab binaries: ``$DRTOOL_CACHE/bin/<name>-<version>`` (default ``~/.cache/drtool``).

Builds take minutes and gigabytes, so each binary is built once and kept outside the repository, named by
the version it was built from: a changed pin builds a new binary instead of silently reusing an old one.
Concurrent callers (parallel test workers, two `drtool lab up`) serialise on a lock file so a build runs
once, and results are renamed into place, so a killed build never leaves a truncated binary that looks valid.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("DRTOOL_CACHE", "~/.cache/drtool")).expanduser()


def binary_path(name: str, version: str) -> Path:
    """Where a build of ``name`` at ``version`` is kept; the version is in the name so pins never collide."""
    return cache_dir() / "bin" / f"{name}-{version}"


def cached_binary(name: str, version: str, build: Callable[[Path], None]) -> Path:
    """The cached ``<name>-<version>``, calling ``build(target)`` under a lock when it is missing."""
    target = binary_path(name, version)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.parent / f".{target.name}.lock"):
        if not target.is_file():
            build(target)
    return target


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if needed), held for the ``with`` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
