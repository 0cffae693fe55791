"""A Kubernetes chain at a point, read like a full backup: ``restore --at``, its verify, and ``compact``.

``PointView`` is a ``RestoreContext`` over a chain's full with the deltas replayed to the point
(deltas.py): every delta is read to its end first (so each is verified whole before anything is written,
the contract's "stage, then commit"), and each type's artifact then streams the full's records with the
changes merged in. The ordinary restore and verify (restore.py, verify.py) run on it unchanged, so a
point-in-time restore keeps their guarantees (held workloads, owners relinked, idempotent reruns).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from drtool.plugin.contract import ArtifactInfo, BackupContext, Check, RestoreContext, RestoreResult
from drtool.points import Point

from .artifacts import LEFT_FORMAT, ndjson, types_in
from .deltas import Changes, merged, read_changes
from .discovery import ResourceType
from .objects import dumps

RestoreHook = Callable[[RestoreContext, Mapping[str, Any], Mapping[str, Any]], RestoreResult]
VerifyHook = Callable[[RestoreContext, Mapping[str, Any], Mapping[str, Any]], list[Check]]


class _Lines:
    """An ``ArtifactSource`` over records made on the fly (the full's own stream is verified as it is read)."""

    def __init__(self, records: Iterator[dict[str, Any]]) -> None:
        self.records = records

    def __iter__(self) -> Iterator[bytes]:
        for rec in self.records:
            yield dumps(rec) + b"\n"

    def read(self, n: int = -1) -> bytes:
        return b"".join(self)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        raise NotImplementedError("a point view is read line by line")


class PointView:
    """Implements ``RestoreContext`` for the state of ``ctx``'s chain at ``point`` (default ``ctx.point``)."""

    def __init__(self, ctx: RestoreContext, point: Point | None = None) -> None:
        self.ctx = ctx
        self.changes: Changes = read_changes(ctx.deltas, point if point is not None else ctx.point)
        self.backup_id, self.created, self.plugin_meta = ctx.backup_id, ctx.created, ctx.plugin_meta
        self.deltas: Sequence[RestoreContext] = ()
        self.point: Point | None = None
        self.full_types = {t.artifact: t for t in types_in(ctx)}
        self.types: dict[str, ResourceType] = dict(self.full_types)
        extra = []
        plugin = ctx.artifacts[0].plugin if ctx.artifacts else ""
        for t in self.changes.types.values():
            if t.artifact not in self.types:
                self.types[t.artifact] = t
                extra.append(ArtifactInfo(plugin, t.artifact, 0, "", t.meta()))
        self.artifacts: list[ArtifactInfo] = [*ctx.artifacts, *extra]

    @property
    def recovery_point(self) -> str:
        """The source time of the newest change replayed (the full's when there is none)."""
        return self.changes.last_at or self.ctx.created

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[Any]:
        t = self.types.get(name)
        if t is None:
            with self.ctx.open(name) as src:
                yield src
            return
        full = ndjson(self.ctx, name) if name in self.full_types else iter(())
        yield _Lines(merged(full, self.changes.last.get(t.key, {}), self.changes.synced.get(t.key)))

    def progress(self, description: str, total: int | None = None) -> Any:
        return self.ctx.progress(description, total)


def fold(ctx: RestoreContext, out: BackupContext, options: Mapping[str, Any]) -> dict[str, Any]:
    """A full backup of the chain's tip: ``ctx``'s full with every delta replayed, one artifact per type
    (types left with no object leave none), the full's other artifacts copied. Its meta carries the tip's
    watch positions, so a follower that resumes after it continues the chain."""
    view = PointView(ctx, Point())
    counts: dict[str, int] = {}
    for art in view.artifacts:
        t = view.types.get(art.name)
        if t is None:
            if art.meta.get("format") == LEFT_FORMAT:
                _copy(ctx, out, art)
            continue
        with view.open(art.name) as src:
            lines = iter(src)
            first = next(lines, None)
            if first is None:
                continue
            with out.artifact(art.name, meta=t.meta(), sensitive=t.key == "secrets") as sink:
                sink.write(first)
                counts[t.key] = 1
                for line in lines:
                    sink.write(line)
                    counts[t.key] += 1
    tip_meta = dict(ctx.deltas[-1].plugin_meta) if ctx.deltas else {}
    base = dict(ctx.plugin_meta)
    return {
        **base,
        "objects": sum(counts.values()),
        "resources": {key: {"count": n} for key, n in sorted(counts.items())},
        "positions": tip_meta.get("positions", base.get("positions")),
        "folded": {"from": ctx.backup_id, "deltas": len(ctx.deltas), "events": view.changes.events},
    }


def _copy(ctx: RestoreContext, out: BackupContext, art: ArtifactInfo) -> None:
    with ctx.open(art.name) as src, out.artifact(art.name, meta=dict(art.meta), sensitive=art.sensitive) as sink:
        for chunk in src:
            sink.write(chunk)


def at_point(ctx: RestoreContext) -> RestoreContext:
    """What a restore or verify reads: ``ctx`` itself, or for ``--at`` the chain at its point."""
    return PointView(ctx) if ctx.point is not None else ctx


def restore_at(
    ctx: RestoreContext,
    target: Mapping[str, Any],
    options: Mapping[str, Any],
    restore: RestoreHook,
) -> RestoreResult:
    """``restore`` of the backup, or for ``--at`` of the chain's state at the point, with the recovery point
    (the source time of the newest change replayed) in its details for the rehearsal's RPO."""
    if ctx.point is None:
        return restore(ctx, target, options)
    view = PointView(ctx)
    result = restore(view, target, options)
    facts = {
        "asked": ctx.point.describe(),
        "base_backup": ctx.backup_id,
        "deltas": [d.backup_id for d in ctx.deltas],
        "changes": view.changes.events,
        "time": view.recovery_point,
    }
    summary = (
        f"{result.summary} (as of {view.recovery_point}: {view.changes.events} change(s) of "
        f"{len(ctx.deltas)} delta(s) replayed onto {ctx.backup_id})"
    )
    details = {**result.details, "recovery_point": view.recovery_point, "point_in_time": facts}
    return RestoreResult(result.changed, summary, details)


def point_in_time(restore: RestoreHook, verify: VerifyHook) -> tuple[RestoreHook, VerifyHook]:
    """A plugin's ``restore`` and ``verify`` hooks that also serve ``--at`` of its chain."""

    def restore_hook(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return restore_at(ctx, target, options, restore)

    def verify_hook(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return verify(at_point(ctx), target, options)

    return restore_hook, verify_hook
