"""Restoring checkpoints to a bucket/prefix or a directory, each checkpoint's commit files last.

A trainer resumes from a checkpoint once its marker (``.metadata``, the safetensors index, ``COMPLETE``...)
is there, so those are written only after every other object of the checkpoint landed and was verified
(the store checks each object's chunks and length at the end of its stream, before the upload completes). A
checkpoint whose restore fails has what this run wrote of it removed again. Re-running is idempotent:
objects already equal (by the SHA-256 drtool stored with them, or by re-reading) are left alone; objects
that differ are refused unless ``overwrite=true``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import posixpath
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.contract import ArtifactInfo, Check, Dependency, RestoreContext, RestoreResult
from drtool.plugin.toolkit import paths
from drtool.plugin.toolkit.settings import as_bool, as_list

from . import detect, shards
from .backup import scan
from .location import IO_BLOCK, Location, hash_stream, open_location
from .settings import DEFAULT_RESTORE_WORKERS, SourceSpec


@dataclasses.dataclass(frozen=True)
class Options:
    select: tuple[str, ...] = ()  # checkpoint names or globs ("run-a/checkpoint-*")
    source: str | None = None  # restore only this source, at the target's root
    overwrite: bool = False
    workers: int = DEFAULT_RESTORE_WORKERS
    shard: tuple[int, int] | None = None  # a sharded restore (docs/scaling.md): this worker's index, and N
    job: str = ""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> Options:
        shard = None
        if options.get("shard_count") is not None:
            shard = (int(options.get("shard_index", 0)), int(options["shard_count"]))
        return cls(
            select=tuple(as_list(options.get("checkpoints"))),
            source=options.get("source") or None,
            overwrite=as_bool(options.get("overwrite")),
            workers=max(1, int(options.get("workers", DEFAULT_RESTORE_WORKERS))),
            shard=shard,
            job=str(options.get("job") or ""),
        )


@dataclasses.dataclass
class Group:
    """One checkpoint to restore: its artifacts, commit files last, and their keys on the target."""

    name: str  # as named on the target
    items: list[tuple[ArtifactInfo, str]]

    @property
    def data(self) -> list[tuple[ArtifactInfo, str]]:
        return [i for i in self.items if int(i[0].meta.get("commit", -1)) < 0]

    @property
    def commits(self) -> list[tuple[ArtifactInfo, str]]:
        return sorted(
            (i for i in self.items if int(i[0].meta.get("commit", -1)) >= 0), key=lambda i: i[0].meta["commit"]
        )


def plan(ctx: RestoreContext, options: Options) -> list[Group]:
    arts = [a for a in ctx.artifacts if options.source in (None, a.meta.get("source"))]
    if options.source and not arts:
        raise UsageError(f"checkpoints: backup {ctx.backup_id} has no source {options.source!r}")
    by_source = len({a.meta.get("source") for a in arts}) > 1
    groups: dict[str, Group] = {}
    for art in arts:
        ck = str(art.meta.get("checkpoint", ""))
        if options.select and not detect.matches(ck, options.select):
            continue
        prefix = f"{paths.segment(art.meta['source'], 'checkpoints: source name')}/" if by_source else ""
        name = f"{prefix}{ck}" if ck else prefix.rstrip("/")
        key = prefix + paths.relative(art.meta["key"], "checkpoints: object key")
        groups.setdefault(name, Group(name, [])).items.append((art, key))
    if options.select and not groups:
        raise UsageError(f"checkpoints: no checkpoint in backup {ctx.backup_id} matches {list(options.select)}")
    return [groups[n] for n in sorted(groups)]


def target_sha256(loc: Location, key: str, size: int) -> str | None:
    """The SHA-256 of what ``key`` holds on the target: None if absent, "" if its size already differs."""
    stat = loc.stat(key)
    if stat is None:
        return None
    if stat.size != size:
        return ""
    stored = loc.stored_sha256(key)
    if stored:
        return stored
    with loc.open(key, stat) as (stream, _):
        return hash_stream(stream.read)


class _Exact:
    """The artifact stream as a file for uploaders: reads one byte past the end so the reader's
    end-of-stream check runs (and raises) before the upload completes."""

    def __init__(self, reader: Any, size: int) -> None:
        self._reader, self._left = reader, size

    def read(self, n: int = -1) -> bytes:
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = self._reader.read(want) if want else b""
        self._left -= len(data)
        if self._left == 0:
            self._reader.read(1)  # EOF: the end-of-stream verification runs here
        return data


def _put(ctx: RestoreContext, loc: Location, art: ArtifactInfo, key: str) -> None:
    with ctx.open(art.name) as reader:
        loc.put(key, _Exact(reader, art.size), art.size, art.sha256)  # type: ignore[arg-type]


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    opts = Options.parse(options)
    loc = open_location(dict(target), opts.workers)
    groups = plan(ctx, opts)
    with ThreadPoolExecutor(opts.workers, thread_name_prefix="ckpt-restore") as pool:
        items = [i for g in groups for i in g.items]
        states = dict(
            zip((k for _, k in items), pool.map(lambda i: target_sha256(loc, i[1], i[0].size), items), strict=True)
        )
        conflicts = [k for a, k in items if states[k] is not None and states[k] != a.sha256]
        if conflicts and not opts.overwrite:
            raise UsageError(
                f"checkpoints: {len(conflicts)} object(s) on {loc.url} differ from the backup, e.g. {conflicts[0]}",
                "restore to an empty prefix, or pass -o overwrite=true",
            )
        written = 0
        owner = shards.assign(((k, a.size) for g in groups for a, k in g.data), opts.shard[1]) if opts.shard else {}
        for group in groups:
            todo = {k for a, k in group.items if states[k] != a.sha256}
            data = [(a, k) for a, k in group.data if k in todo and (not opts.shard or owner[k] == opts.shard[0])]
            commits = [] if opts.shard else [(a, k) for a, k in group.commits if k in todo]
            done: list[str] = []
            try:
                for (_, key), _ in zip(data, pool.map(lambda i: _put(ctx, loc, i[0], i[1]), data), strict=True):
                    done.append(key)
                for art, key in commits:  # in order, after all data: the checkpoint appears complete at once
                    _put(ctx, loc, art, key)
                    done.append(key)
            except BaseException:
                for key in done:
                    if states[key] is None:  # only what this run created; never an object that was there
                        loc.delete(key)
                raise
            written += len(data) + len(commits)
        committed = not opts.shard
        if opts.shard and _all_shards_done(loc, opts):
            committed = True
            for group in groups:  # the last worker to finish makes every checkpoint appear, commit files last
                for art, key in group.commits:
                    if states[key] != art.sha256:
                        _put(ctx, loc, art, key)
                        written += 1
            _forget_shards(loc, opts)
    total = sum(len(g.items) for g in groups)
    if not written:
        facts = {"checkpoints": len(groups), "committed": committed}
        return RestoreResult(False, f"{len(groups)} checkpoint(s) already on {loc.url}", facts)
    return RestoreResult(
        True,
        f"{len(groups)} checkpoint(s), {written}/{total} object(s) written to {loc.url}",
        {"checkpoints": [g.name for g in groups], "objects_written": written, "committed": committed},
    )


SHARDS = ".drtool-shards"  # done markers of a sharded restore's workers, removed when it completes


def _all_shards_done(loc: Location, opts: Options) -> bool:
    """Mark this worker's data as landed; True when every worker's has (then the commit files may go)."""
    assert opts.shard is not None
    index, count = opts.shard
    if not opts.job:
        raise UsageError("checkpoints: a sharded restore needs -o job=ID", "drtool shard restore sets it")
    empty = hashlib.sha256(b"").hexdigest()
    loc.put(f"{SHARDS}/{opts.job}/done-{index:05d}", io.BytesIO(b""), 0, empty)
    done = {o.key.rsplit("-", 1)[-1] for o in loc.list(f"{SHARDS}/{opts.job}")}
    return all(f"{i:05d}" in done for i in range(count))


def _forget_shards(loc: Location, opts: Options) -> None:
    for o in loc.list(f"{SHARDS}/{opts.job}"):
        loc.delete(o.key)


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    """Re-read every restored object and compare its SHA-256 with the backup's; then judge each restored
    checkpoint complete by the same rules the backup used."""
    opts = Options.parse(options)
    loc = open_location(dict(target), opts.workers)
    groups = plan(ctx, opts)

    def digest(item: tuple[ArtifactInfo, str]) -> bool:
        stat = loc.stat(item[1])
        if stat is None or stat.size != item[0].size:
            return False
        with loc.open(item[1], stat) as (stream, _):
            sha = hashlib.sha256()
            while block := stream.read(IO_BLOCK):
                sha.update(block)
        return sha.hexdigest() == item[0].sha256

    checks = []
    markers = tuple({posixpath.basename(k) for g in groups for _, k in g.commits} | set(detect.DEFAULT_MARKERS))
    with ThreadPoolExecutor(opts.workers, thread_name_prefix="ckpt-verify") as pool:
        for group in groups:
            same = list(pool.map(digest, group.items))
            bad = [k for (_, k), ok in zip(group.items, same, strict=True) if not ok]
            detail = f"{len(same) - len(bad)}/{len(same)} objects equal" + (f"; differ: {bad[:3]}" if bad else "")
            checks.append(Check(f"{group.name}: objects equal to backup", not bad, detail))
    found = {ck.name: ck for ck in scan(SourceSpec("target", dict(target), markers), loc)}
    for group in groups:
        ck = found.get(group.name)
        ok = ck is not None and ck.complete
        checks.append(
            Check(f"{group.name}: complete on target", ok, ck.kind if ok and ck else (ck.reason if ck else "not found"))
        )
    return checks


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    loc = open_location(dict(target))
    if not loc.endpoint():
        return []
    return [
        Dependency("endpoint", loc.endpoint(), "object store the checkpoints are restored into", f"target {loc.url}")
    ]
