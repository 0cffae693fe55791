"""The etcd plugin: a consistent snapshot of one etcd cluster, restored into a NEW member.

Source settings (a mapping; each falls back to the environment variable in brackets, which is what
``drtool lab`` exports):

- ``endpoints`` [ETCD_ENDPOINTS]: list or comma-separated string; the snapshot is taken from the first
  endpoint that answers (ONE endpoint: a snapshot is one member's database).
- ``cacert``, ``cert``, ``key`` [ETCD_CACERT, ETCD_CERT, ETCD_KEY]: PEM files for (mutual) TLS.
- ``timeout`` [ETCD_TIMEOUT]: seconds to wait for a connection or for the next bytes of a reply (10).

Restore target settings: ``data_dir`` (required; must be missing or empty), ``name`` (member name,
"restored"), ``initial_cluster_token`` (generated when absent: a restore is a NEW cluster), ``peer_url`` /
``peer_port``, ``client_url`` / ``client_port``, ``start`` (start a health-checked etcd on the restored
data, the lab's EtcdServer), ``tls`` (that etcd serves clients over mutual TLS), ``component_dir`` or
``lab_dir`` (where that etcd keeps its log and certificates). Verify also reads ``endpoints``/TLS files of
the target (default: what the restore recorded) and ``compare_with`` (source settings, to compare every
key with the source at the snapshot revision).

Restore options: ``bump_revision`` (default 1000000000; 0 disables), ``require_bump_revision`` (fail
when etcdutl cannot bump), ``etcdutl`` (path; or DRTOOL_ETCDUTL). Why the bump matters for Kubernetes:
see ``restore.py``.

Continuous backup (docs/etcd.md): ``follow`` writes a full and then deltas of the watch stream (follow.py);
a restore with ``--at`` replays them to a revision or time (pitr.py, replay.py); ``fold`` is `drtool compact`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import (
    BackupContext,
    Check,
    Dependency,
    FollowContext,
    Inventory,
    RestoreContext,
    RestoreResult,
)

from . import backup as _backup
from . import follow as _follow
from . import pitr as _pitr
from . import restore as _restore
from . import verify as _verify
from .client import EtcdSettings
from .lab import EtcdLab

__all__ = ["EtcdPlugin"]


class EtcdPlugin:
    """Implements ``drtool.plugin.contract.Plugin`` for etcd v3 (3.4+, tested with 3.5)."""

    name = "etcd"
    description = "etcd v3 snapshot (Maintenance.Snapshot), restored with etcdutl into a new member"
    lab = EtcdLab()  # drtool.plugin.contract.LabSupport: seed a lab source, prepare a lab target

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        if _pitr.is_point_restore(ctx):
            return _pitr.run_point_restore(ctx, target, options)
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _verify.run_verify(ctx, target)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        return dependencies(ctx, target)

    # --- optional continuous-backup hooks (drtool.plugin.contract.Follower) ---

    def follow(self, source: Mapping[str, Any], ctx: FollowContext) -> None:
        _follow.follow(source, ctx)

    def fold(self, ctx: RestoreContext, out: BackupContext, options: Mapping[str, Any]) -> Mapping[str, Any]:
        return _pitr.fold(ctx, out, options)


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    """The new member (and its advertised peer URL), and the source only when verify is asked to compare
    with it. The restore itself contacts no old member; the store is added by the core."""
    deps: list[Dependency] = []
    spec = _restore.RestoreSpec.parse(target, {})
    marker = _restore.read_marker(spec.marker_path) or {}
    lab_url = "http://127.0.0.1" if spec.start else None  # the port is chosen when the restore runs
    peer = marker.get("peer_url") or spec.peer_url or lab_url or spec.advertised_peer_url
    deps.append(
        Dependency(
            "reference",
            peer,
            "peer URL written into the restored member's membership",
            f"--initial-advertise-peer-urls of member {spec.name}",
        )
    )
    client = target.get("endpoints") or (marker.get("client") or {}).get("endpoints") or spec.client_url or lab_url
    for url in _as_list(client):
        deps.append(
            Dependency("endpoint", url, "the restored etcd, health-checked and verified", "verify connects to it")
        )
    if target.get("compare_with"):
        for url in EtcdSettings.from_mapping(target["compare_with"]).endpoints:
            deps.append(
                Dependency(
                    "endpoint", url, "source etcd that verify compares every key with (optional)", "target.compare_with"
                )
            )
    return deps


def _as_list(value: Any) -> list[str]:
    if not value:
        return []
    return [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v) for v in value]
