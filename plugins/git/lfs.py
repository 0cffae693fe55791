"""Git LFS objects: found in a mirror, fetched with ``git lfs fetch --all``, carried as a tar beside the bundle.

A bundle holds only LFS pointer files; the objects live on the LFS server. A repository whose branch heads
route files through the LFS filter therefore gets a second artifact, ``<name>.lfs.tar``, with every object
any ref points at (``lfs/objects/<aa>/<bb>/<oid>``, as git-lfs stores them). A restore checks each object's
SHA-256 against its oid while unpacking, and pushes the objects (``git lfs push --all``) before any ref, so
a target never shows a commit whose LFS files are missing. Needs the ``git-lfs`` binary (Debian: git-lfs).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tarfile
from pathlib import Path

from drtool.errors import IntegrityError, SourceError
from drtool.plugin.contract import ArtifactSink, ArtifactSource
from drtool.plugin.toolkit import archive

from .gitcmd import Ref, git

_OBJECT = re.compile(r"^objects/([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})$")
BLOCK = 1 << 20


def artifact_name(name: str) -> str:
    return f"{name}.lfs.tar"


def uses_lfs(mirror: Path, refs: dict[str, Ref]) -> bool:
    """Whether any branch head's ``.gitattributes`` routes files through the LFS filter."""
    for name, ref in refs.items():
        if name.startswith("refs/heads/"):
            with contextlib.suppress(SourceError):
                if "filter=lfs" in git("show", f"{ref.commit}:.gitattributes", cwd=mirror):
                    return True
    return False


def require() -> None:
    try:
        git("lfs", "version", what="git lfs")
    except SourceError:
        raise SourceError(
            "this git repository uses Git LFS, and git-lfs is not installed",
            "apt-get install git-lfs, or set lfs: skip to back up the history without the LFS objects",
        ) from None


def store(repo: Path) -> Path:
    return repo / "lfs"


def objects(repo: Path) -> dict[str, Path]:
    """oid -> file of every LFS object stored in a (bare) repository."""
    root = store(repo)
    found = {}
    for path in (root / "objects").glob("*/*/*") if root.is_dir() else ():
        rel = path.relative_to(root).as_posix()
        if _OBJECT.match(rel) and path.is_file():
            found[path.name] = path
    return found


def fetch_all(mirror: Path, what: str) -> dict[str, Path]:
    git("lfs", "fetch", "--all", "origin", cwd=mirror, what=f"fetching the LFS objects of {what}")
    return objects(mirror)


def write_tar(found: dict[str, Path], root: Path, sink: ArtifactSink) -> None:
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for oid in sorted(found):
            tar.add(found[oid], arcname=found[oid].relative_to(store(root)).as_posix(), recursive=False)


def extract(src: ArtifactSource, repo: Path) -> int:
    """Unpack objects into ``repo``'s LFS store, refusing anything but objects whose content matches the oid."""
    count = 0
    with tarfile.open(fileobj=src, mode="r|") as tar:  # type: ignore[call-overload]
        for member in archive.members(tar, "git: LFS archive"):
            match = _OBJECT.match(member.name)
            if not match or not member.isfile():
                raise IntegrityError(f"unexpected entry {member.name!r} in an LFS archive", "restore another backup")
            dest = store(repo) / member.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            fileobj = tar.extractfile(member)
            assert fileobj is not None
            with open(dest, "wb") as out:
                while block := fileobj.read(BLOCK):
                    digest.update(block)
                    out.write(block)
            if digest.hexdigest() != match.group(3):
                os.unlink(dest)
                raise IntegrityError(f"LFS object {match.group(3)} does not match its content")
            count += 1
    return count


def push(repo: Path, url: str) -> None:
    git("lfs", "push", "--all", url, cwd=repo, what=f"pushing LFS objects to {url}")
