"""Reading tar archives out of a backup: regular files and directories only, each name checked.

tarfile's ``data`` filter refuses links that point out of the tree, device files and absolute names, but it
is only as good as the Python patch level it runs on (its link checks were bypassed more than once, e.g.
CVE-2025-4517), and a link that stays inside the tree still lets a later member write through it. Nothing
drtool backs up needs a link, a device or a FIFO restored, so every restore that reads a tar goes through
``members``: anything but a regular file or a directory is refused outright, before it is extracted, with
its name in the one-line error, and every name must be a plain relative path (``paths.relative``).
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

from drtool.errors import IntegrityError

from . import paths

_KIND = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


def members(tar: tarfile.TarFile, what: str) -> Iterator[tarfile.TarInfo]:
    """Each member of ``tar`` in order (streaming works), refused unless a regular file or a directory with
    a plain relative name; ``what`` names the archive in errors."""
    for member in tar:
        if not (member.isreg() or member.isdir()):
            kind = _KIND.get(member.type, f"a member of type {member.type!r}")
            raise IntegrityError(
                f"{what} holds {member.name!r}, {kind}: refused (archives restore regular files and folders only)",
                paths.HINT,
            )
        paths.relative(member.name.rstrip("/"), f"{what} member")
        yield member


def extract_all(tar: tarfile.TarFile, root: Path, what: str) -> int:
    """Extract every member under ``root`` (a fresh staging folder); returns how many regular files."""
    files = 0
    for member in members(tar, what):
        paths.under(root, member.name.rstrip("/"), f"{what} member")
        tar.extract(member, root, filter="data")  # still on: modes and owners normalized as before
        files += member.isreg()
    return files
