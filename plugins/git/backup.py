"""Back up git repositories: a mirror clone, one bundle of every ref, verified, streamed into the store.

The bundle holds every ref the server has (host-specific ones too, for the record); a restore recreates
branches and tags only. The mirror lives in a private temporary directory for the duration of one
repository's backup: git needs a repository to write a bundle from, and ``git bundle verify`` needs
the bundle as a file, so the bundle is written there, verified, then streamed into the store in
``BLOCK``-sized writes (memory stays bounded whatever the repository's size).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from drtool.errors import SourceError, UsageError
from drtool.plugin.contract import BackupContext, Inventory

from . import lfs
from .gitcmd import PORTABLE, Ref, git, list_refs
from .settings import RepoSource, sources

BLOCK = 1 << 20
BUNDLE_FORMAT = "git-bundle"


def artifact_name(name: str) -> str:
    return f"{name}.bundle"


def discover(source: Mapping[str, Any]) -> Inventory:
    counts = {"repos": 0, "branches": 0, "tags": 0, "other_refs": 0}
    for repo in sources(source):
        refs = list_refs(url=repo.url)
        counts["repos"] += 1
        counts["branches"] += sum(n.startswith("refs/heads/") for n in refs)
        counts["tags"] += sum(n.startswith("refs/tags/") for n in refs)
        counts["other_refs"] += sum(not n.startswith(PORTABLE) for n in refs)
    return Inventory(counts=counts)


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    lfs_mode = str(source.get("lfs", "auto"))
    if lfs_mode not in ("auto", "skip"):
        raise UsageError(f"git source setting lfs={lfs_mode!r}: use auto or skip")
    repos = {r.name: _backup_repo(r, ctx, lfs_mode) for r in sources(source)}
    remotes = [r.url for r in sources(source) if _host(r.url)]  # file:// URLs and local paths name no remote host
    hosts = sorted({_host(url) for url in remotes})
    return {"repos": repos, "failure_domain": {"git_remotes": remotes, "git_hosts": hosts}}


def _backup_repo(repo: RepoSource, ctx: BackupContext, lfs_mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drtool-git-") as tmp:
        mirror = Path(tmp) / "mirror.git"
        git("clone", "--mirror", "--quiet", repo.url, mirror, what=f"cloning {repo.url}")
        refs = list_refs(mirror)
        if not refs:
            raise SourceError(f"git repository {repo.url} has no branches or tags", "nothing to back up there")
        lfs_facts = _lfs(ctx, repo, mirror, refs, lfs_mode)
        bundle = Path(tmp) / "all.bundle"
        git("bundle", "create", "--quiet", bundle, "--all", cwd=mirror, what=f"bundling {repo.name}")
        git("bundle", "verify", "--quiet", bundle, cwd=mirror, what=f"verifying the bundle of {repo.name}")
        meta = {"format": BUNDLE_FORMAT, "repo": repo.name, "url": repo.url, "refs": len(refs)}
        progress = ctx.progress(f"bundle {repo.name}", bundle.stat().st_size)
        with ctx.artifact(artifact_name(repo.name), meta=meta) as sink, open(bundle, "rb") as f:
            while block := f.read(BLOCK):
                sink.write(block)
                progress.advance(len(block))
        with contextlib.suppress(AttributeError):
            progress.done()
        head = git("symbolic-ref", "--quiet", "HEAD", cwd=mirror, what="reading HEAD")
    return _facts(repo, refs, head) | {"lfs": lfs_facts}


def _lfs(ctx: BackupContext, repo: RepoSource, mirror: Path, refs: dict[str, Ref], mode: str) -> dict[str, Any]:
    """LFS objects into ``<name>.lfs.tar`` when the repository uses LFS (unless ``lfs: skip``)."""
    if not lfs.uses_lfs(mirror, refs):
        return {"used": False}
    if mode == "skip":
        return {"used": True, "objects": None, "note": "skipped (lfs: skip): restored files will be pointers only"}
    lfs.require()
    found = lfs.fetch_all(mirror, repo.name)
    size = sum(p.stat().st_size for p in found.values())
    meta = {"format": "git-lfs-objects-tar", "repo": repo.name, "objects": len(found), "bytes": size}
    with ctx.artifact(lfs.artifact_name(repo.name), meta=meta) as sink:
        lfs.write_tar(found, mirror, sink)
    return {"used": True, "objects": len(found), "bytes": size, "artifact": lfs.artifact_name(repo.name)}


def _facts(repo: RepoSource, refs: dict[str, Ref], head: str) -> dict[str, Any]:
    """Each branch's head commit and commit time (the configuration RPO), tags, and what a restore drops."""
    branches = {
        n.removeprefix("refs/heads/"): {"commit": r.commit, "time": r.time}
        for n, r in refs.items()
        if n.startswith("refs/heads/")
    }
    tags = {n.removeprefix("refs/tags/"): r.object for n, r in refs.items() if n.startswith("refs/tags/")}
    hidden: dict[str, int] = {}
    for name in refs:
        if not name.startswith(PORTABLE):
            prefix = "/".join(name.split("/")[:2]) + "/*"
            hidden[prefix] = hidden.get(prefix, 0) + 1
    return {
        "url": repo.url,
        "artifact": artifact_name(repo.name),
        "head": head.removeprefix("refs/heads/"),
        "branches": branches,
        "tags": tags,
        "newest_commit_time": max((b["time"] for b in branches.values()), default=None),
        "host_refs_not_restored": hidden,
    }


def _host(url: str) -> str:
    parts = urlsplit(url)
    if parts.hostname:
        return parts.hostname
    if "@" in url and ":" in url:  # scp-like git@host:org/repo.git
        return url.split("@", 1)[1].split(":", 1)[0]
    return ""
