"""Files that hold secrets or trust decisions on this machine: created 0600 in 0700 folders, never through a
link an attacker planted, never replacing what is there unless replacing is the point.

Key files, recovery-share files, pins and the catalog go through here (docs/threat-model.md, section 4).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from drtool.errors import UsageError

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def private_dir(path: Path) -> Path:
    """``path`` as a folder, created 0700 (with its parents) when missing; an existing one is left as it is."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def refuse_existing(path: Path) -> None:
    """UsageError if anything is at ``path``, a dangling symbolic link included: check before doing work
    whose secret would be lost if the file could not be written."""
    if os.path.lexists(path):
        raise UsageError(f"{path} already exists", "choose a new path; drtool never overwrites a secret file")


def create_private(path: Path, data: str | bytes) -> None:
    """Write a new file readable by its owner alone. Refuses an existing path, a symbolic link included:
    a secret is never written over another file or through a link to one."""
    try:
        fd = os.open(path, _CREATE, 0o600)
    except FileExistsError:
        raise UsageError(f"{path} already exists", "choose a new path; drtool never overwrites a secret file") from None
    except OSError as exc:
        raise UsageError(f"cannot create {path}: {exc.strerror}", "check the folder exists and is writable") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())


def replace_private(path: Path, data: str | bytes) -> None:
    """Atomically replace ``path`` with a new 0600 file (written aside, then renamed over it)."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    try:
        create_private(tmp, data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def touch_private(path: Path) -> None:
    """Make sure ``path`` exists as a 0600 file before another library opens it (SQLite creates 0644)."""
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, _CREATE, 0o600))
