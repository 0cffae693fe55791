"""Restore git repositories from their bundles: branches and tags only, pushed to a remote or as a bare repo.

Per repository, stage then commit:
1. stream the bundle out of the store into a private temporary file (the core checks its hash at EOF);
2. ``git bundle verify`` it, then fetch ``refs/heads/*`` and ``refs/tags/*`` out of it into a scratch
   bare repository — host-specific refs (``refs/pull/*``, ``refs/remotes/*``, ``refs/keep-around/*``...)
   are never fetched, so they cannot reach the target, and neither can a branch deleted before the backup;
3. ``path``: the scratch repository is renamed into place (it is created beside it, so one rename);
   ``url``: one atomic push of every branch and tag (all refs update, or none).
LFS objects (lfs.py) are unpacked into the scratch repository's LFS store, checked against their oids, and
for ``url`` pushed with ``git lfs push --all`` before the refs.

Idempotent: when the target already holds exactly the backup's branches and tags, nothing is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.errors import IntegrityError, NotFound, UsageError
from drtool.plugin.contract import RestoreContext, RestoreResult
from drtool.plugin.toolkit import paths

from . import lfs
from .backup import BLOCK
from .gitcmd import PORTABLE, git, list_refs, portable
from .settings import RestoreTarget

SCRATCH_PREFIX = ".drtool-git-"


def repos_of(ctx: RestoreContext, only: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    repos = dict((ctx.plugin_meta or {}).get("repos") or {})
    for name in repos:  # a name fills `{name}` in a path or URL: one plain component, never `..` or `a/b`
        paths.segment(name, "git: repository name")
    unknown = sorted(set(only) - set(repos))
    if unknown:
        raise NotFound(f"backup {ctx.backup_id} has no git repository {', '.join(unknown)}", f"it has {sorted(repos)}")
    return {n: m for n, m in repos.items() if not only or n in only}


def expected_refs(meta: Mapping[str, Any]) -> dict[str, str]:
    """The branches and tags the backup recorded, as full ref name -> object id."""
    heads = {f"refs/heads/{b}": v["commit"] for b, v in meta["branches"].items()}
    return heads | {f"refs/tags/{t}": obj for t, obj in meta["tags"].items()}


def current_refs(target: RestoreTarget, name: str, several: bool) -> dict[str, str] | None:
    """The target's branches and tags; None when a bare ``path`` does not exist yet."""
    if target.url:
        return portable(list_refs(url=target.where(name, several)))
    path = target.bare_path(name, several)
    if not path.exists() or not any(path.iterdir()):
        return None
    if not (path / "HEAD").is_file():
        raise UsageError(f"{path} exists and is not a bare git repository", "restore into a new or empty path")
    return portable(list_refs(path))


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    spec = RestoreTarget.parse(target, options)
    repos = repos_of(ctx, spec.only)
    several = len(repos_of(ctx)) > 1
    done: dict[str, str] = {}
    for name, meta in repos.items():
        done[name] = _restore_repo(ctx, spec, name, meta, several)
    changed = [n for n, what in done.items() if what != "unchanged"]
    if spec.dry_run:
        summary = f"dry run: {len(changed)} of {len(done)} git repositories would change"
        return RestoreResult(False, summary, {"repos": done})
    summary = f"{len(changed)} of {len(done)} git repositories restored" + (
        "" if changed else " (all already held the backup's branches and tags)"
    )
    return RestoreResult(changed=bool(changed), summary=summary, details={"repos": done})


def _restore_repo(ctx: RestoreContext, target: RestoreTarget, name: str, meta: Mapping[str, Any], several: bool) -> str:
    where = target.where(name, several)
    existing = current_refs(target, name, several)
    if existing == expected_refs(meta):
        return "unchanged"
    if target.path and existing is not None:
        raise UsageError(
            f"{where} already holds a different git repository",
            "restore into a new or empty path; drtool never overwrites a repository",
        )
    if target.dry_run:
        return "would create a bare repository" if target.path else f"would push {len(expected_refs(meta))} refs"
    workspace = target.bare_path(name, several).parent if target.path else None
    if workspace:
        workspace.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=workspace) as tmp:
        scratch = _stage(ctx, Path(tmp), name, meta)
        if target.path:
            path = target.bare_path(name, several)
            if path.exists():
                path.rmdir()  # empty (checked above): replaced by the scratch repository in one rename
            os.rename(scratch, path)
            return "created bare repository"
        if (meta.get("lfs") or {}).get("artifact"):
            lfs.push(scratch, where)  # objects first: no ref on the target ever points at a missing object
        args = ["push", "--atomic", "--porcelain", "--quiet", *(["--force"] if target.force else []), where]
        git(*args, *(f"{p}*:{p}*" for p in PORTABLE), cwd=scratch, what=f"pushing {name} to {where}")
        return "pushed"


def _stage(ctx: RestoreContext, tmp: Path, name: str, meta: Mapping[str, Any]) -> Path:
    """A verified scratch bare repository holding exactly the bundle's branches and tags."""
    bundle = tmp / "repo.bundle"
    fd = os.open(bundle, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, ctx.open(meta["artifact"]) as src:
        while block := src.read(BLOCK):
            out.write(block)
    scratch = tmp / "repo.git"
    git("init", "--quiet", "--bare", f"--initial-branch={meta['head']}", scratch, what="creating a repository")
    git("bundle", "verify", "--quiet", bundle, cwd=scratch, what=f"verifying the bundle of {name}")
    refspecs = [f"+{p}*:{p}*" for p in PORTABLE]
    git("fetch", "--quiet", "--no-tags", bundle, *refspecs, cwd=scratch, what=f"reading the bundle of {name}")
    got = portable(list_refs(scratch))
    if got != expected_refs(meta):
        raise IntegrityError(
            f"the bundle of {name} does not hold the refs its backup recorded", "restore another backup"
        )
    bundle.unlink()
    if (meta.get("lfs") or {}).get("artifact"):
        with ctx.open(meta["lfs"]["artifact"]) as src:
            lfs.extract(src, scratch)
    shutil.rmtree(scratch / "hooks", ignore_errors=True)  # sample hooks only; a restored repo needs none
    return scratch
