"""A point of a delta chain as an etcd snapshot: the chain's full restored into a throwaway member, the
deltas replayed into it up to the point, and the member snapshotted.

Why a real etcd member rather than writing bbolt ourselves: etcd then builds its own index, history and
lease table, and the result is a snapshot ``etcdutl snapshot restore`` takes like any other.

Revision mapping: each source revision is replayed as exactly ONE transaction, so the member's revision
advances by one per source revision and, starting from the snapshot's revision, equals the source's
revision at every step; keys get the source's create/mod revisions and versions. Each transaction
compares every key it touches with what the source had just before (the key's version, and its mod
revision from ``prev_kv``), so the replay proves it rebuilds the source's history: a delta that does not
fit its base fails the transaction and the restore stops, naming the revision and key.

The member runs with ``--unsafe-no-fsync`` (its data is thrown away; the snapshot taken at the end is
checked by its own SHA-256) and with transaction limits large enough for any source transaction (a
DeleteRange or a lease revoke can delete thousands of keys at one revision). Leases it holds are kept
alive while the replay runs, so none expires and deletes keys (which would add revisions of its own).
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from drtool.errors import IntegrityError, NotFound, SourceError
from drtool.plugin.contract import Point, RestoreContext
from drtool.points import parse_time

from .client import EtcdClient, EtcdSettings
from .deltas import ARTIFACT, DeltaFile, Revision
from .pipeline import TxnPipeline
from .restore import RestoreSpec, check_manifest, etcdutl_restore, snapshot_artifact, snapshot_status, stage
from .snapshot import copy_snapshot

REPLAY_FLAGS = ["--unsafe-no-fsync", "--max-txn-ops=10000000", "--max-request-bytes=536870912"]
UNKNOWN_LEASE_TTL = 60  # a lease already gone when the follower asked: its keys are deleted soon after
KEEPALIVE_EVERY = 2.0


class ReplayGap(IntegrityError):
    """The deltas do not continue the revisions the replay has reached."""


@dataclasses.dataclass
class Replayed:
    """What a replay did: the facts a restore records and verify checks."""

    base_backup: str
    base_revision: int  # the full snapshot's exact revision
    revision: int  # the revision reached (equal to the source's)
    time: str | None  # when the follower received that revision (None: no delta replayed)
    deltas: list[str] = dataclasses.field(default_factory=list)
    revisions: int = 0
    events: int = 0
    skipped: int = 0  # revisions a delta held that the full snapshot already had
    leases_granted: int = 0
    keys: int = 0
    hashkv: dict[str, int] | None = None
    snapshot_sha256: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class ReplayMember:
    """A throwaway etcd restored from a snapshot file, for replaying deltas into."""

    def __init__(self, workdir: Path, etcdutl: str, snapshot: Path) -> None:
        self.workdir = workdir
        data = workdir / "member"
        spec = RestoreSpec.parse(
            {"data_dir": str(data), "name": "drtool-replay", "lab_dir": str(workdir)}, {"bump_revision": 0}
        )
        self.server = spec.member()  # on free loopback ports, which the restored membership then names
        self.server.extra_args = list(REPLAY_FLAGS)
        spec = dataclasses.replace(spec, peer_url=self.server.peer_url, client_url=self.server.client_url)
        etcdutl_restore(etcdutl, snapshot, data, spec, [])
        self.client = EtcdClient(EtcdSettings((self.server.client_url,), timeout=120.0))
        self.leases: dict[int, int] = {}  # id -> TTL, kept alive while the replay runs
        self._pipe: TxnPipeline | None = None
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep_alive, name="drtool-etcd-keepalive", daemon=True)

    def __enter__(self) -> ReplayMember:
        self.server.start()
        self._pipe = TxnPipeline(self.server.client_port)
        for lease in self.client.call("/v3/lease/leases").get("leases", []):
            lid = int(lease["ID"])
            answer = self.client.call("/v3/lease/timetolive", {"ID": lid})
            self.leases[lid] = int(answer.get("grantedTTL") or UNKNOWN_LEASE_TTL)
        self._keeper.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._keeper.is_alive():
            self._keeper.join()
        if self._pipe is not None:
            self._pipe.close()
        self.client.__exit__()
        self.server.stop()
        shutil.rmtree(self.workdir / "member", ignore_errors=True)

    def _keep_alive(self) -> None:
        """Refresh every lease well before its TTL runs out (etcd's minimum TTL is a few seconds)."""
        kept: dict[int, float] = {}
        with EtcdClient(self.client.settings) as client:
            while not self._stop.wait(0.5):
                now = time.monotonic()
                for lease, ttl in list(self.leases.items()):
                    if now - kept.get(lease, 0.0) >= min(KEEPALIVE_EVERY, ttl / 3):
                        try:
                            client.call("/v3/lease/keepalive", {"ID": lease})
                        except SourceError:
                            continue
                        kept[lease] = now

    @property
    def revision(self) -> int:
        return int(self.client.status()["header"]["revision"])

    def grant(self, leases: Mapping[int, int | None]) -> int:
        """Grant the leases a delta names that the member lacks, with the same id and granted TTL."""
        granted = 0
        for lease, ttl in leases.items():
            if lease not in self.leases:
                ttl = int(ttl or UNKNOWN_LEASE_TTL)
                self.client.call("/v3/lease/grant", {"ID": lease, "TTL": ttl})
                self.leases[lease] = ttl
                granted += 1
        return granted

    def apply(self, rev: Revision) -> None:
        """One source revision as one transaction, guarded by what each key was just before it (pipelined:
        ``flush`` waits for it)."""
        compare: list[dict[str, Any]] = []
        success: list[dict[str, Any]] = []
        for op in rev.ops:
            if op.prev_mod is not None:
                compare.append({"target": "MOD", "key": op.key, "mod_revision": op.prev_mod})
            if op.put:
                compare.append({"target": "VERSION", "key": op.key, "version": op.version - 1})
                if op.version > 1:
                    compare.append({"target": "CREATE", "key": op.key, "create_revision": op.create})
                put = {"key": op.key, "value": op.value, **({"lease": op.lease} if op.lease else {})}
                success.append({"request_put": put})
            else:
                if op.prev_mod is None:
                    compare.append({"target": "VERSION", "key": op.key, "version": 0, "result": "GREATER"})
                success.append({"request_delete_range": {"key": op.key}})
        assert self._pipe is not None
        self._pipe.submit({"compare": compare, "success": success}, lambda answer: _applied(rev, answer))

    def flush(self) -> None:
        """Wait until every submitted revision is applied (and checked)."""
        assert self._pipe is not None
        self._pipe.flush()

    def facts(self, revision: int) -> tuple[int, dict[str, int] | None]:
        return self.client.count(revision), self.client.hashkv(revision)

    def compact(self, revision: int) -> None:
        """Drop the replay's history before ``revision`` and defragment, so the snapshot stays small.

        Compacted at ``revision - 1``: etcd refuses HashKV at the compaction revision itself, and the
        restore's verification asks for it at ``revision``."""
        if revision > 1:
            self.client.call("/v3/kv/compaction", {"revision": revision - 1, "physical": True})
        self.client.call("/v3/maintenance/defragment")

    def snapshot(self, path: Path) -> str:
        with open(path, "wb") as out:
            streamed = copy_snapshot(self.client.snapshot_messages(), out, self.client.endpoint)
        return streamed.sha256


def materialize(
    ctx: RestoreContext,
    point: Point,
    workdir: Path,
    etcdutl: str,
    out: Path,
    *,
    compact: bool = False,
) -> Replayed:
    """Write to ``out`` a snapshot of the source at ``point``: ``ctx``'s full plus ``ctx.deltas`` replayed."""
    workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    base = workdir / f"base-{secrets.token_hex(4)}.db"
    try:
        info = snapshot_artifact(ctx)
        check_manifest(ctx, stage(ctx, base, info.size))
        recorded = snapshot_status(etcdutl, base)["revision"]
        with ReplayMember(workdir, etcdutl, base) as member:
            base.unlink()
            # the member's own revision: etcdutl reports the newest key's, which an etcd that never wrote
            # (revision 1, no key) or one compacted past its last delete has not got
            base_revision = max(recorded, member.revision)
            _check_base(ctx, point, base_revision)
            result = Replayed(ctx.backup_id, base_revision, base_revision, None)
            replay(member, ctx.deltas, point, result)
            if point.position is not None and result.revision != point.position:
                raise NotFound(f"the deltas end at revision {result.revision}, before {point.describe()}")
            if member.revision != result.revision:
                raise IntegrityError(
                    f"the replay member is at revision {member.revision}, expected {result.revision}",
                    "something else wrote to it (a lease expired?); retry the restore",
                )
            result.keys, result.hashkv = member.facts(result.revision)
            if compact:
                member.compact(result.revision)
            result.snapshot_sha256 = member.snapshot(out)
        return result
    finally:
        base.unlink(missing_ok=True)


def _check_base(ctx: RestoreContext, point: Point, base_revision: int) -> None:
    if point.position is not None and base_revision > point.position:
        raise NotFound(
            f"full snapshot {ctx.backup_id} holds revision {base_revision}, after {point.describe()}",
            "restore an earlier point of the chain or an earlier chain",
        )


def replay(member: ReplayMember, deltas: Sequence[RestoreContext], point: Point, result: Replayed) -> None:
    """Apply the deltas' revisions after the member's up to ``point``; refuses any hole in the revisions."""
    cluster = None
    for delta in deltas:
        with delta.open(ARTIFACT) as stream:
            df = DeltaFile.open(f"{delta.backup_id}/{ARTIFACT}", stream)
            cluster = _same_cluster(cluster, df, delta.backup_id)
            if df.first > result.revision + 1:
                raise ReplayGap(
                    f"revisions {result.revision + 1}..{df.first - 1} are missing: the full snapshot or previous "
                    f"delta ends at {result.revision}, delta {delta.backup_id} starts at {df.first}",
                    "restore a point before the gap",
                )
            result.deltas.append(delta.backup_id)
            member.flush()  # a delta's leases are granted after every earlier revision is in
            result.leases_granted += member.grant(df.leases)
            reached = _replay_file(member, df, point, result)
            member.flush()
            if reached:
                return


def _replay_file(member: ReplayMember, df: DeltaFile, point: Point, result: Replayed) -> bool:
    """Replay one delta; True when the point was reached inside it."""
    for rev in df.revisions():
        if rev.revision <= result.revision:
            result.skipped += 1
            continue
        if _after(rev, point):
            return True
        member.apply(rev)
        result.revision, result.time = rev.revision, rev.time
        result.revisions += 1
        result.events += len(rev.ops)
        if point.position is not None and rev.revision >= point.position:
            return True
    return False


def _after(rev: Revision, point: Point) -> bool:
    if point.position is not None:
        return rev.revision > point.position
    return point.time is not None and parse_time(rev.time) > point.time


def _same_cluster(cluster: str | None, df: DeltaFile, backup_id: str) -> str:
    mine = str(df.head.get("cluster_id"))
    if cluster is not None and mine != cluster:
        raise IntegrityError(f"delta {backup_id} is of etcd cluster {mine}, the chain's earlier deltas of {cluster}")
    return mine


def _applied(rev: Revision, answer: Mapping[str, Any]) -> None:
    if not answer.get("succeeded"):
        keys = ", ".join(_show(op.key) for op in rev.ops[:3])
        raise IntegrityError(
            f"revision {rev.revision} of the deltas does not apply to the restored state (keys {keys}): "
            "the deltas do not continue this full snapshot's history",
            "the chain is damaged; restore a point before this revision, or a full backup",
        )
    reached = int(answer["header"]["revision"])
    if reached != rev.revision:
        raise IntegrityError(f"replaying revision {rev.revision} produced revision {reached} in the member")


def _show(key_b64: str) -> str:
    text = repr(base64.b64decode(key_b64))[2:-1]
    return text if len(text) <= 60 else text[:57] + "..."


@contextmanager
def replay_dir(near: Path) -> Iterator[Path]:
    """A private work dir beside ``near`` (same filesystem as the restore), removed afterwards."""
    path = near.with_name(f"{near.name}.replay")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
