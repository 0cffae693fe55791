"""Point-in-time restore (``drtool restore -p etcd --at ...``) and folding a chain (``drtool compact``).

Both build the snapshot of a point with ``replay.materialize``. A restore then hands that snapshot to the
ordinary restore path (restore.py: etcdutl restore into a scratch dir, marker, one rename, start), so a
point-in-time restore keeps every guarantee of a plain one: nothing is visible in ``data_dir`` until the
whole replay succeeded, a rerun of the same point changes nothing, the revision is bumped when etcdutl
can. A fold writes the snapshot into the store as a full backup of the chain.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.binaries import etcd_binary
from drtool.plugin.contract import ArtifactInfo, BackupContext, Point, RestoreContext, RestoreResult

from . import restore as _restore
from .backup import SNAPSHOT
from .replay import Replayed, materialize, replay_dir
from .snapshot import DIGEST_SIZE

COPY_BLOCK = 1024 * 1024


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    """The etcd plugin's restore: the point the core resolved (``--at``: ``ctx.point`` set), or else the
    backup's own snapshot (restore.py)."""
    if ctx.point is not None:
        return run_point_restore(ctx, target, options)
    return _restore.run_restore(ctx, target, options)


def _etcdutl(options: Mapping[str, Any]) -> str:
    return str(options.get("etcdutl") or etcd_binary("etcdutl"))


class PointStaging:
    """``restore.Staging`` for a point: the snapshot comes from a replay, not straight from the store."""

    def __init__(self, ctx: RestoreContext, options: Mapping[str, Any]) -> None:
        self.point: Point = ctx.point or Point()
        deltas = [d.backup_id for d in ctx.deltas]
        # what makes two restores "the same": the full, the point asked for, the deltas it resolved to
        self.key = {"at": self.point.to_json(), "deltas": [deltas[0], deltas[-1], len(deltas)] if deltas else []}
        self.etcdutl = _etcdutl(options)

    def stage(self, ctx: RestoreContext, staged: Path, info: ArtifactInfo) -> tuple[str, dict[str, Any]]:
        with replay_dir(staged) as workdir:
            done = materialize(ctx, self.point, workdir, self.etcdutl, staged)
        return done.snapshot_sha256, {"point_in_time": point_facts(ctx, done), "expected": _expected(done)}


def point_facts(ctx: RestoreContext, done: Replayed) -> dict[str, Any]:
    """What the restore proved, for the marker, verify and the rehearsal's RPO."""
    return {
        "asked": ctx.point and ctx.point.describe(),
        **done.to_json(),
        "continuity": f"revisions {done.base_revision + 1}..{done.revision} replayed, each exactly once, in order",
    }


def _expected(done: Replayed) -> dict[str, Any]:
    return {"keys": done.keys, "hashkv": done.hashkv, "revision": done.revision}


def run_point_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    result = _restore.run_restore(ctx, target, options, PointStaging(ctx, options))
    facts = (result.details or {}).get("point_in_time") or {}
    # the recovery point: when the newest replayed revision reached the follower (the rehearsal's RPO)
    details = {**result.details, "recovery_point": facts.get("time") or ctx.created}
    summary = result.summary
    if facts and result.changed:
        summary += (
            f" (revision {facts['revision']} as of {facts['time'] or 'the full snapshot'}: "
            f"{facts['revisions']} revision(s) of {len(facts['deltas'])} delta(s) replayed onto {facts['base_backup']})"
        )
    return RestoreResult(result.changed, summary, details)


def fold(ctx: RestoreContext, out: BackupContext, options: Mapping[str, Any]) -> dict[str, Any]:
    """A full backup of the chain's tip: ``ctx``'s full with every delta of ``ctx.deltas`` replayed.

    The work dir holds the keyspace in clear while it runs (as a restore does): it is created private
    (0700) under ``options["workdir"]`` or the system temp dir, and removed afterwards.
    """
    base = Path(str(options.get("workdir") or tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix="drtool-fold-", dir=base) as tmp:
        os.chmod(tmp, 0o700)
        folded = Path(tmp) / "folded.db"
        done = materialize(ctx, Point(), Path(tmp) / "work", _etcdutl(options), folded, compact=True)
        size = folded.stat().st_size
        meta = {"format": "etcd-snapshot", "trailer": "sha256", "folded": True}
        with out.artifact(SNAPSHOT, meta=meta, sensitive=True) as sink, open(folded, "rb") as src:
            while block := src.read(COPY_BLOCK):
                sink.write(block)
    base_meta = dict(ctx.plugin_meta)
    return {
        **{k: base_meta.get(k) for k in ("etcd_version", "cluster_id", "members", "failure_domain")},
        "artifact": SNAPSHOT,
        "revision": done.revision,
        "revision_exact": True,
        "revision_bounds": [done.revision, done.revision],
        "db_size": size - DIGEST_SIZE,
        "sha256": done.snapshot_sha256,
        "keys": done.keys,
        "hashkv": None,  # the fold compacted its history: hashes differ from the source's by design
        "folded": {"from": ctx.backup_id, "deltas": len(done.deltas), "revisions": done.revisions},
    }
