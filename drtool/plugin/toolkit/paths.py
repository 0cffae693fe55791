"""Names that come out of a backup and become paths: checked at restore time, before anything is written.

A backup's content is only as trustworthy as whoever last held the key: checkpoint keys, git repository
names, DNS zone names, archive members, model and version names, Vault KV paths and Kubernetes object
names are all data in a sealed artifact or manifest, and a forged backup can carry ``../../etc/cron.d/x``
in any of them. A name checked only when the backup was written proves nothing at restore time, so every
plugin puts each such name through one of these before using it:

- ``relative``: a '/'-separated relative name (an object key, a KV path): no empty, ``.`` or ``..``
  segment, no leading '/', no NUL or other control character, no backslash;
- ``segment``: one component of a path (a repository name, a zone file name): ``relative`` and no '/';
- ``under``: ``relative`` joined to a directory, and the result must still be inside that directory
  once symbolic links are resolved (a link already in the target cannot carry a write out of it);
- ``url_path``: the path of an HTTP API call built from such names: no ``.``/``..`` segment (HTTP clients
  normalize ``/v2/a/../../x`` to ``/x``, which would reach another endpoint with the restore's
  credentials) and no ``?``, ``#`` or ``%`` (which would change what the path means).

A name that fails is refused with a one-line ``IntegrityError`` naming it (exit 4: forged or damaged data).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from drtool.errors import IntegrityError

_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f?#%\\]")
HINT = "the backup was forged or damaged; nothing was written there: restore another backup"


class UnsafeName(IntegrityError):
    """A name from backup content that would leave the place it is restored into."""

    def __init__(self, what: str, name: object, why: str) -> None:
        super().__init__(f"{what} {name!r} from the backup {why}", HINT)


def relative(name: object, what: str) -> str:
    """``name`` if it is a relative '/'-separated name that stays where it is joined; else ``UnsafeName``."""
    if not isinstance(name, str) or not name:
        raise UnsafeName(what, name, "is not a name")
    if name.startswith("/"):
        raise UnsafeName(what, name, "is an absolute path")
    if _CONTROL.search(name):
        raise UnsafeName(what, name, "holds a control character or a backslash")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise UnsafeName(what, name, "has an empty, '.' or '..' path segment")
    return name


def segment(name: object, what: str) -> str:
    """``name`` if it is one path component (``relative`` without '/'); else ``UnsafeName``."""
    if isinstance(name, str) and "/" in name:
        raise UnsafeName(what, name, "holds a '/'")
    return relative(name, what)


def under(root: Path | str, name: object, what: str) -> Path:
    """``root / name``, refused unless it resolves (symbolic links followed) inside ``root``."""
    rel = relative(name, what)
    base = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(base, rel))
    if os.path.commonpath([base, resolved]) != base:
        raise UnsafeName(what, name, f"resolves outside {root}")
    return Path(root) / rel


def url_path(path: str, what: str) -> str:
    """``path`` (an HTTP API path built from backup names) if no segment escapes or re-means it."""
    if _URL_UNSAFE.search(path) or any(part in (".", "..") for part in path.split("/")):
        raise UnsafeName(what, path, "is not a plain API path (a '.', '..', '?', '#', '%' or space in a name)")
    return path
