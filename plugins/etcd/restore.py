"""Restore an etcd snapshot into a NEW member: new data dir, new member name, new cluster token.

Order, so that nothing half-done is ever visible at ``data_dir``:
1. stream the artifact out of the store into a staging file beside the data dir, checking etcd's
   embedded SHA-256 on the way (the core's reader checks its own whole-artifact hash at EOF);
2. ``etcdutl snapshot restore`` into a scratch dir on the same filesystem;
3. write the sidecar marker ``<data_dir>.drtool-restore.json``, then rename the scratch dir into place
   (one rename: a crash leaves either nothing or the complete restore);
4. optionally start a health-checked etcd on it (``drtool.servers.etcd.EtcdServer``).

Idempotency: a non-empty data dir whose marker names the same backup id and artifact SHA-256 is this
exact restore, so a rerun changes nothing. Any other non-empty data dir is refused, never overwritten.

Kubernetes: a restored etcd goes back in revision, and Kubernetes' resourceVersion IS the etcd revision.
Watch caches and informers that outlived the disaster then see "old" versions as current and may ignore
changes for hours (kube-proxy kept stale rules, kubernetes#107457). etcdutl 3.6's ``--bump-revision
1000000000 --mark-compacted`` moves the revision far ahead and compacts below it, so every watcher is
forced to relist. etcdutl 3.5.1 lacks the flags; drtool detects support and records whether it applied.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from drtool.binaries import etcd_binary
from drtool.environ import child_env
from drtool.errors import IntegrityError, NotFound, SourceError, UsageError
from drtool.plugin.contract import ArtifactInfo, RestoreContext, RestoreResult

from .backup import SNAPSHOT
from .snapshot import SnapshotDigest

if TYPE_CHECKING:
    from drtool.servers.etcd import EtcdServer

MARKER_SUFFIX = ".drtool-restore.json"
MARKER_VERSION = 1
SCRATCH_PREFIX = ".drtool-"  # staging files and scratch dirs; leftovers of a crashed run are ours to remove
DEFAULT_BUMP = 1_000_000_000
DEFAULT_PEER_URL = "http://localhost:2380"  # etcdutl's own default
WAL_RESERVE = 128 * 1024 * 1024  # etcd preallocates 64 MiB WAL segments
ETCDUTL_TIMEOUT = 3600.0


@dataclasses.dataclass(frozen=True)
class RestoreSpec:
    """The target settings of one restore, validated. URLs left out are None (chosen at restore time)."""

    data_dir: Path
    name: str
    token: str
    peer_url: str | None
    client_url: str | None
    start: bool
    tls: bool
    component_dir: Path
    bump_revision: int
    require_bump: bool

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreSpec:
        if "etcdutl" in options or "etcdutl" in target:  # a restore option must not choose a program to run
            raise UsageError(
                "the etcd restore takes no `etcdutl` option: drtool finds the binary itself",
                "set DRTOOL_ETCDUTL=/path/to/etcdutl in drtool's environment (docs/etcd.md)",
            )
        if not target.get("data_dir"):
            raise UsageError("the etcd restore target needs `data_dir`", "a new, empty (or missing) directory")
        data_dir = Path(str(target["data_dir"])).expanduser().absolute()
        name = str(target.get("name") or "restored")
        component_dir = target.get("component_dir") or (
            Path(str(target["lab_dir"])) / name
            if target.get("lab_dir")
            else data_dir.with_name(f"{data_dir.name}.etcd")
        )
        bump = options.get("bump_revision", DEFAULT_BUMP)
        return cls(
            data_dir=data_dir,
            name=name,
            token=str(target.get("initial_cluster_token") or f"drtool-{secrets.token_hex(6)}"),
            peer_url=_url(target, "peer"),
            client_url=_url(target, "client"),
            start=bool(target.get("start", False)),
            tls=bool(target.get("tls", False)),
            component_dir=Path(str(component_dir)).expanduser().absolute(),
            bump_revision=int(DEFAULT_BUMP if bump is True else bump or 0),
            require_bump=bool(options.get("require_bump_revision", False)),
        )

    @property
    def marker_path(self) -> Path:
        return self.data_dir.with_name(self.data_dir.name + MARKER_SUFFIX)

    @property
    def advertised_peer_url(self) -> str:
        """The peer URL written into the restored membership (etcd's own default when none is given)."""
        return self.peer_url or DEFAULT_PEER_URL

    def member(self, state: Mapping[str, Any] | None = None) -> EtcdServer:
        """The lab etcd that serves the restored data dir; ports come from the URLs when given.

        Only ``start: true`` and a point-in-time restore's throwaway replay member (replay.py) ask for one,
        so only then is the process supervision loaded."""
        from drtool.servers.etcd import EtcdServer

        if state:
            return EtcdServer.from_state(dict(state))  # type: ignore[return-value]
        return EtcdServer(
            name=self.name,
            dir=str(self.component_dir),
            member_name=self.name,
            cluster_token=self.token,
            client_port=_port(self.client_url),
            peer_port=_port(self.peer_url),
            tls=self.tls,
            data_path=str(self.data_dir),
        )


def _url(target: Mapping[str, Any], kind: str) -> str | None:
    if target.get(f"{kind}_url"):
        return str(target[f"{kind}_url"]).rstrip("/")
    if target.get(f"{kind}_port"):
        return f"http://127.0.0.1:{int(target[f'{kind}_port'])}"
    return None


def _port(url: str | None) -> int:
    """0 (the lab picks a free port) when no URL was given."""
    return (urlparse(url).port or 0) if url else 0


# --- the data dir and its marker ------------------------------------------------------------------


def _contents(directory: Path) -> list[str]:
    """What a data dir holds, ignoring drtool's own scratch leftovers."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        raise UsageError(f"etcd data_dir {directory} exists and is not a directory", "choose a new data_dir")
    return sorted(e for e in os.listdir(directory) if not e.startswith(SCRATCH_PREFIX))


def read_marker(path: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("version") == MARKER_VERSION else None


def write_marker(path: Path, marker: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(marker, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _refuse(spec: RestoreSpec, contents: list[str], marker: Mapping[str, Any] | None) -> UsageError:
    held = f"; it holds backup {marker['backup_id']}" if marker else ""
    return UsageError(
        f"etcd data_dir {spec.data_dir} is not empty ({', '.join(contents[:3])}{held})",
        "restore into a new or empty data_dir; drtool never overwrites an existing etcd data dir",
    )


# --- tools ----------------------------------------------------------------------------------------


def _run(argv: list[str], what: str, timeout: float = ETCDUTL_TIMEOUT) -> str:
    """Run an etcd tool; its last stderr line (etcdutl logs JSON there) becomes the one-line error."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=child_env())
    except subprocess.TimeoutExpired:
        raise SourceError(f"{what} did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise SourceError(f"{what} failed: {last[:300]}", f"run `{' '.join(argv[:3])} --help`")
    return done.stdout


@functools.lru_cache(maxsize=8)
def bump_supported(etcdutl: str) -> bool:
    """Whether this etcdutl has ``--bump-revision`` and ``--mark-compacted`` (etcd 3.6+; 3.5.1 has not)."""
    text = _run([etcdutl, "snapshot", "restore", "--help"], "etcdutl snapshot restore --help", 60)
    return "--bump-revision" in text and "--mark-compacted" in text


def snapshot_status(etcdutl: str, path: Path) -> dict[str, int]:
    """Revision, key count, size and hash of a snapshot file, as etcd reads it."""
    raw = json.loads(_run([etcdutl, "--write-out=json", "snapshot", "status", str(path)], "etcdutl snapshot status"))
    # totalKey counts stored key revisions (history), not live keys
    return {
        "revision": int(raw["revision"]),
        "key_revisions": int(raw["totalKey"]),
        "total_size": int(raw["totalSize"]),
        "hash": int(raw["hash"]),
    }


def _bump_flags(etcdutl: str, spec: RestoreSpec) -> tuple[list[str], dict[str, Any]]:
    if not spec.bump_revision:
        return [], {"requested": 0, "applied": False, "reason": "disabled by options.bump_revision"}
    if bump_supported(etcdutl):
        flags = [f"--bump-revision={spec.bump_revision}", "--mark-compacted"]
        return flags, {"requested": spec.bump_revision, "applied": True, "reason": ""}
    reason = f"{etcdutl} has no --bump-revision/--mark-compacted (etcd < 3.6); set DRTOOL_ETCDUTL to an etcdutl 3.6"
    if spec.require_bump:
        raise UsageError(f"cannot bump the restored revision: {reason}", "or drop options.require_bump_revision")
    return [], {"requested": spec.bump_revision, "applied": False, "reason": reason}


def etcdutl_restore(etcdutl: str, staged: Path, scratch: Path, spec: RestoreSpec, flags: list[str]) -> None:
    argv = [
        etcdutl,
        "snapshot",
        "restore",
        str(staged),
        "--name",
        spec.name,
        "--initial-cluster",
        f"{spec.name}={spec.advertised_peer_url}",
        "--initial-cluster-token",
        spec.token,
        "--initial-advertise-peer-urls",
        spec.advertised_peer_url,
        "--data-dir",
        str(scratch),
        *flags,
    ]
    _run(argv, f"etcdutl snapshot restore into {spec.data_dir}")


# --- staging --------------------------------------------------------------------------------------


def snapshot_artifact(ctx: RestoreContext) -> ArtifactInfo:
    for info in ctx.artifacts:
        if info.name == SNAPSHOT:
            return info
    raise NotFound(f"backup {ctx.backup_id} has no etcd artifact {SNAPSHOT}", "was etcd part of that backup?")


def stage(ctx: RestoreContext, staged: Path, size: int) -> str:
    """Stream the snapshot out of the store into ``staged`` (mode 0600); returns the db's SHA-256.

    Raises IntegrityError, leaving nothing behind but the staging file the caller removes, when
    either the store's hash or etcd's embedded one does not match.
    """
    digest = SnapshotDigest()
    progress = ctx.progress("stage snapshot", size)
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, ctx.open(SNAPSHOT) as src:
        for chunk in src:
            digest.update(chunk)
            out.write(chunk)
            progress.advance(len(chunk))
        out.flush()
        os.fsync(out.fileno())
    return digest.verify(f"etcd snapshot of backup {ctx.backup_id}")


def _check_space(workspace: Path, size: int) -> None:
    free = shutil.disk_usage(workspace).free
    needed = 2 * size + WAL_RESERVE  # the staged file and the restored db exist side by side for a moment
    if free < needed:
        raise SourceError(
            f"not enough space in {workspace} to restore etcd: {free // 2**20} MiB free, {needed // 2**20} MiB needed",
            "free space there or choose another data_dir",
        )


def _publish(scratch: Path, data_dir: Path) -> None:
    """Move the restored data into place: one rename, or one per entry when data_dir is an (empty) mount."""
    if not data_dir.exists():
        os.rename(scratch, data_dir)
        return
    for entry in sorted(os.listdir(scratch)):
        os.rename(scratch / entry, data_dir / entry)
    scratch.rmdir()


def _cleanup_scratch(workspace: Path, data_dir: Path) -> None:
    """Remove the staging files and scratch dirs crashed runs left for this data dir."""
    for entry in workspace.glob(f"{SCRATCH_PREFIX}{data_dir.name}-*"):
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


# --- the restore ----------------------------------------------------------------------------------


class Staging(Protocol):
    """Where the snapshot a restore writes comes from. The default is the backup's own artifact; a
    point-in-time restore (pitr.py) stages a snapshot it built by replaying deltas."""

    key: Mapping[str, Any] | None  # identifies what is restored beyond the backup id (None: the backup itself)

    def stage(self, ctx: RestoreContext, staged: Path, info: ArtifactInfo) -> tuple[str, dict[str, Any]]:
        """Write the snapshot to ``staged``; return its database SHA-256 and facts for the marker."""
        ...


class StoreStaging:
    key = None

    def stage(self, ctx: RestoreContext, staged: Path, info: ArtifactInfo) -> tuple[str, dict[str, Any]]:
        db_sha = stage(ctx, staged, info.size)
        check_manifest(ctx, db_sha)
        return db_sha, {}


def run_restore(
    ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any], staging: Staging | None = None
) -> RestoreResult:
    staging = staging or StoreStaging()
    spec = RestoreSpec.parse(target, options)
    info = snapshot_artifact(ctx)
    marker = read_marker(spec.marker_path)
    contents = _contents(spec.data_dir)
    if contents:
        same = marker and marker.get("backup_id") == ctx.backup_id and marker.get("artifact_sha256") == info.sha256
        if same and marker.get("point") == staging.key:  # type: ignore[union-attr]
            return _already_restored(spec, marker)  # type: ignore[arg-type]
        raise _refuse(spec, contents, marker)
    member = spec.member() if spec.start else None
    if member:
        spec = dataclasses.replace(spec, peer_url=member.peer_url, client_url=member.client_url)
    marker = _restore_data(ctx, spec, info, options, staging)
    summary = f"restored etcd revision {marker['snapshot']['revision']} into {spec.data_dir}"
    if member:
        _start(spec, marker, member)
        summary += f", serving at {member.client_url}"
    return RestoreResult(True, summary, marker)


def _restore_data(
    ctx: RestoreContext, spec: RestoreSpec, info: ArtifactInfo, options: Mapping[str, Any], staging: Staging
) -> dict[str, Any]:
    workspace = spec.data_dir if spec.data_dir.exists() else spec.data_dir.parent
    workspace.mkdir(parents=True, exist_ok=True)
    _cleanup_scratch(workspace, spec.data_dir)
    _check_space(workspace, info.size)
    tag = f"{SCRATCH_PREFIX}{spec.data_dir.name}-{secrets.token_hex(4)}"
    staged, scratch = workspace / f"{tag}.db", workspace / f"{tag}.restoring"
    etcdutl = etcd_binary("etcdutl")
    flags, bump = _bump_flags(etcdutl, spec)  # before staging: refuse early when the bump is required
    try:
        db_sha, facts = staging.stage(ctx, staged, info)
        status = snapshot_status(etcdutl, staged)
        etcdutl_restore(etcdutl, staged, scratch, spec, flags)
        marker = _marker(ctx, spec, info, db_sha, status, bump) | {"point": staging.key, **facts}
        write_marker(spec.marker_path, marker)
        try:
            _publish(scratch, spec.data_dir)
        except OSError as exc:
            spec.marker_path.unlink(missing_ok=True)
            raise UsageError(
                f"cannot move the restored data into {spec.data_dir}: {exc.strerror}",
                "something else wrote to data_dir meanwhile; choose a new one",
            ) from None
    finally:
        staged.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return marker


def backup_meta(ctx: RestoreContext) -> dict[str, Any]:
    """What ``backup()`` returned for this backup, when the core exposes it (``plugin_meta``)."""
    return dict(ctx.plugin_meta)


def check_manifest(ctx: RestoreContext, db_sha: str) -> None:
    """The snapshot must be the database the backup recorded (a second, independent identity check)."""
    recorded = backup_meta(ctx).get("sha256")
    if recorded and recorded != db_sha:
        raise IntegrityError(
            f"etcd snapshot of backup {ctx.backup_id} is not the database its manifest describes",
            "the store is damaged or was tampered with; run `drtool check --read-data`",
        )


def _marker(
    ctx: RestoreContext,
    spec: RestoreSpec,
    info: ArtifactInfo,
    db_sha: str,
    status: Mapping[str, int],
    bump: Mapping[str, Any],
) -> dict[str, Any]:
    restored = status["revision"] + (bump["requested"] if bump["applied"] else 0)
    return {
        "version": MARKER_VERSION,
        "backup_id": ctx.backup_id,
        "artifact_sha256": info.sha256,
        "db_sha256": db_sha,
        "data_dir": str(spec.data_dir),
        "name": spec.name,
        "initial_cluster_token": spec.token,
        "peer_url": spec.advertised_peer_url,
        "snapshot": dict(status),
        "restored_revision": restored,
        "bump_revision": dict(bump),
        "source_cluster_id": backup_meta(ctx).get("cluster_id"),
        "restored_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "client": {"endpoints": [spec.client_url]} if spec.client_url else None,
        "server": None,
    }


def _start(spec: RestoreSpec, marker: dict[str, Any], member: EtcdServer) -> bool:
    """Start (or confirm running) the etcd serving the restored data; True when it had to be started."""
    if member.healthy():
        return False
    if member.running():
        member.stop()
    member.start()
    env = member.env()
    marker["server"] = member.to_state()
    marker["client"] = {
        "endpoints": [member.client_url],
        "cacert": env.get("ETCD_CACERT"),
        "cert": env.get("ETCD_CERT"),
        "key": env.get("ETCD_KEY"),
    }
    write_marker(spec.marker_path, marker)
    return True


def _already_restored(spec: RestoreSpec, marker: dict[str, Any]) -> RestoreResult:
    summary = f"{spec.data_dir} already holds backup {marker['backup_id']}"
    if not spec.start:
        return RestoreResult(False, summary + "; nothing to do", marker)
    spec = dataclasses.replace(spec, peer_url=marker.get("peer_url"), token=marker["initial_cluster_token"])
    started = _start(spec, marker, spec.member(marker.get("server")))
    return RestoreResult(started, summary + ("; started etcd on it" if started else "; its etcd is running"), marker)
