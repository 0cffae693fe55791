"""Discover and back up one etcd cluster: a Maintenance.Snapshot streamed into the store as it arrives.

The snapshot is taken from ONE endpoint (etcd's own advice: a snapshot is one member's database), the
first configured endpoint that answers. Nothing is written to local disk and no more than one stream
message (32 KiB of database) is held in memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError
from drtool.plugin.contract import BackupContext, Inventory

from .client import EtcdClient, EtcdSettings, connect, host_of
from .snapshot import DIGEST_SIZE, StreamedSnapshot, copy_snapshot

SNAPSHOT = "snapshot.db"


def discover(source: Mapping[str, Any]) -> Inventory:
    client, status = connect(EtcdSettings.from_mapping(source))
    with client:
        revision = int(status["header"]["revision"])
        keys = client.count(revision)
        members = client.members()
    return Inventory(
        counts={"keys": keys, "members": len(members)},
        bytes=int(status.get("dbSize", 0)),
        details={
            "endpoint": client.endpoint,
            "version": status.get("version"),
            "revision": revision,
            "db_size_in_use": int(status.get("dbSizeInUse", 0)),
            "cluster_id": status["header"].get("cluster_id"),
        },
    )


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    client, before = connect(EtcdSettings.from_mapping(source))
    with client:
        members = client.members()
        streamed = _stream(client, before, ctx)
        after = client.status()
        revision, exact = snapshot_revision(streamed.header, before, after)
        facts = _revision_facts(client, revision) if exact else {"keys": None, "hashkv": None}
    header = before["header"]
    return {
        "artifact": SNAPSHOT,
        "endpoint": client.endpoint,
        "etcd_version": before.get("version"),
        "cluster_id": header.get("cluster_id"),
        "member_id": header.get("member_id"),
        "revision": revision,
        "revision_exact": exact,
        "revision_bounds": [_rev(before), _rev(after)],
        "raft_term": int(header.get("raft_term", 0)),
        "db_size": streamed.db_size,
        "db_size_in_use": int(before.get("dbSizeInUse", 0)),
        "sha256": streamed.sha256,
        **facts,
        "members": [_member(m) for m in members],
        "failure_domain": failure_domain(client.endpoint, members),
    }


def _stream(client: EtcdClient, status: Mapping[str, Any], ctx: BackupContext) -> StreamedSnapshot:
    meta = {
        "format": "etcd-snapshot",
        "trailer": "sha256",
        "endpoint": client.endpoint,
        "etcd_version": status.get("version"),
        "cluster_id": status["header"].get("cluster_id"),
    }
    progress = ctx.progress("snapshot", int(status.get("dbSize", 0)) + DIGEST_SIZE)
    # sensitive: etcd holds every Kubernetes Secret (encrypted at rest only if the cluster was set up so)
    with ctx.artifact(SNAPSHOT, meta=meta, sensitive=True) as sink:
        streamed = copy_snapshot(client.snapshot_messages(), sink, client.endpoint, progress)
    with contextlib.suppress(AttributeError):
        progress.done()
    return streamed


def _rev(status: Mapping[str, Any]) -> int:
    return int(status["header"]["revision"])


def snapshot_revision(
    header: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[int, bool]:
    """The revision the snapshot holds, and whether it is exact.

    etcd 3.6 puts it in the snapshot's response header. etcd 3.5 does not; then the snapshot's revision
    lies between the revisions seen just before and just after it, and is exact when those are equal.
    When they are not, the restore reads the exact value from the file (`etcdutl snapshot status`).
    """
    if header.get("revision"):
        return int(header["revision"]), True
    return _rev(before), _rev(before) == _rev(after)


def _revision_facts(client: EtcdClient, revision: int) -> dict[str, Any]:
    """Key count and HashKV at the snapshot revision, so a restore can be checked without the source.

    Best effort: the source may compact that revision away meanwhile; the backup itself is still good.
    """
    facts: dict[str, Any] = {"keys": None, "hashkv": None}
    with contextlib.suppress(SourceError):
        facts["keys"] = client.count(revision)
    with contextlib.suppress(SourceError):
        facts["hashkv"] = client.hashkv(revision)
    return facts


def _member(member: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": member.get("ID"),
        "name": member.get("name", ""),
        "peer_urls": member.get("peerURLs", []),
        "client_urls": member.get("clientURLs", []),
    }


def failure_domain(endpoint: str, members: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The etcd addresses that die with the source cluster: the endpoint used and every member's URLs."""
    client_urls = {endpoint, *(u for m in members for u in m.get("clientURLs", []))}
    peer_urls = {u for m in members for u in m.get("peerURLs", [])}
    hosts = {host_of(u) for u in client_urls | peer_urls}
    return {"etcd_endpoints": sorted(client_urls), "etcd_hosts": sorted(hosts)}
