"""Restoring checkpoints to a bucket/prefix or a directory, each checkpoint's commit files last.

A trainer resumes from a checkpoint once its marker (``.metadata``, the safetensors index, ``COMPLETE``...)
is there, so those are written only after every other object of the checkpoint landed and was verified
(the store checks each object's chunks and length at the end of its stream, before the upload completes). A
checkpoint whose restore fails has what this run wrote of it removed again. Re-running is idempotent:
objects already equal (by the SHA-256 drtool stored with them, or by re-reading) are left alone; objects
that differ are refused unless ``overwrite=true``. Verification checks what this run wrote against the
receipts it kept while writing, reading back a sample (``receipts``), unless ``verify=full``.
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
from .location import Location, hash_stream, open_location
from .receipts import BLOCK, Receipt, Receipts, Tally, block_crc, sample
from .settings import DEFAULT_RESTORE_WORKERS, SourceSpec

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Options:
    select: tuple[str, ...] = ()  # checkpoint names or globs ("run-a/checkpoint-*")
    source: str | None = None  # restore only this source, at the target's root
    overwrite: bool = False
    workers: int = DEFAULT_RESTORE_WORKERS
    shard: tuple[int, int] | None = None  # a sharded restore (docs/scaling.md): this worker's index, and N
    job: str = ""
    verify: str = "sample"  # "full": verification reads every object back, not a sample (module receipts)

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
            verify=_verify_mode(options.get("verify")),
        )


def _verify_mode(value: Any) -> str:
    mode = str(value or "sample")
    if mode not in ("sample", "full"):
        raise UsageError(f"checkpoints: verify={mode!r}", "verify=sample (the default) or verify=full")
    return mode


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
        self._taken(len(data))
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        view = memoryview(buffer).cast("B")[: self._left]
        n = int(self._reader.readinto(view)) if view else 0
        self._taken(n)
        return n

    def _taken(self, n: int) -> None:
        self._left -= n
        if self._left == 0:
            self._reader.read(1)  # EOF: the end-of-stream verification runs here


def _put(ctx: RestoreContext, loc: Location, art: ArtifactInfo, key: str) -> None:
    """Write one object, keeping its receipt (block CRCs, the target's stat) for this run's verification."""
    with ctx.open(art.name) as reader:
        tally = Tally(_Exact(reader, art.size))
        loc.put(key, tally, art.size, art.sha256)  # type: ignore[arg-type]
    stat = loc.stat(key)
    if stat is not None:
        Receipts.of(ctx).keep(loc.url, key, Receipt(stat, tally.done()))


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
    """Check every restored object against the backup, then judge each restored checkpoint complete by the
    same rules the backup used. An object this run wrote is checked against its receipt: stat'ed again and a
    sample of its blocks read back (``receipts``); with ``verify=full``, or without a receipt, it is read
    back whole and its SHA-256 compared with the backup's. Each check says which it did."""
    opts = Options.parse(options)
    loc = open_location(dict(target), opts.workers)
    groups = plan(ctx, opts)
    receipts = None if opts.verify == "full" else Receipts.of(ctx)

    def check(item: tuple[ArtifactInfo, str]) -> tuple[bool, int, bool]:
        """Equal?, bytes read back, and whether it was a sample."""
        art, key = item
        stat = loc.stat(key)
        if stat is None or stat.size != art.size:
            return False, 0, False
        receipt = receipts.get(loc.url, key) if receipts is not None else None
        if receipt is None:
            with loc.open(key, stat) as (stream, _):
                return hash_stream(stream.read) == art.sha256, art.size, False
        if stat.fingerprint != receipt.stat.fingerprint:
            return False, 0, True  # replaced since this run wrote it
        read = 0
        for i in sample(art.size):
            data = loc.read_range(key, i * BLOCK, BLOCK)
            read += len(data)
            if i >= len(receipt.crcs) or block_crc(data) != receipt.crcs[i]:
                return False, read, True
        return True, read, True

    checks = []
    markers = tuple({posixpath.basename(k) for g in groups for _, k in g.commits} | set(detect.DEFAULT_MARKERS))
    with ThreadPoolExecutor(opts.workers, thread_name_prefix="ckpt-verify") as pool:
        for group in groups:
            results = list(pool.map(check, group.items))
            bad = [k for (_, k), (ok, _, _) in zip(group.items, results, strict=True) if not ok]
            detail = f"{len(results) - len(bad)}/{len(results)} objects equal" + (f"; differ: {bad[:3]}" if bad else "")
            checks.append(Check(f"{group.name}: objects equal to backup", not bad, f"{detail}; {_how(group, results)}"))
    found = {ck.name: ck for ck in scan(SourceSpec("target", dict(target), markers), loc)}
    for group in groups:
        ck = found.get(group.name)
        ok = ck is not None and ck.complete
        checks.append(
            Check(f"{group.name}: complete on target", ok, ck.kind if ok and ck else (ck.reason if ck else "not found"))
        )
    return checks


def _how(group: Group, results: list[tuple[bool, int, bool]]) -> str:
    """What a check read back: "full" or "sampled", with the bytes read against the checkpoint's size."""
    total = sum(a.size for a, _ in group.items)
    read = sum(r[1] for r in results)
    sampled = sum(r[2] for r in results)
    mib = f"{read / MiB:.1f} of {total / MiB:.1f} MiB read back"
    if not sampled:
        return f"verify=full: {mib}"
    return f"sampled ({sampled} of {len(results)} objects by their write receipts; verify=full reads all): {mib}"


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    loc = open_location(dict(target))
    if not loc.endpoint():
        return []
    return [
        Dependency("endpoint", loc.endpoint(), "object store the checkpoints are restored into", f"target {loc.url}")
    ]
