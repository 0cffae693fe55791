"""Back up one OpenBao/Vault: a raft snapshot (streamed), a logical KV v2 export, and drtool's key escrow.

Artifacts, all sensitive:
- ``raft.snap``: ``GET sys/storage/raft/snapshot``, streamed into the store as it arrives. It holds the
  whole storage (secrets, policies, auth methods, tokens, leases), encrypted by the cluster's barrier
  keys — which only the unseal keys open;
- ``kv/<mount>.ndjson`` per selected KV v2 mount (kv.py), readable without those keys, restorable into any
  Vault;
- ``escrow.json``: the unseal keys (and root token) from where the operator keeps them (escrow.py).
What none of them hold — server configuration, TLS material, auto-unseal/KMS credentials — is listed in
docs/vault.md; the plugin meta records the facts verify compares (policies, auth and secret mounts).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import hvac
import requests

from drtool.errors import SourceError, UsageError
from drtool.plugin.contract import BackupContext, Inventory
from drtool.plugin.toolkit.settings import as_bool

from . import escrow as _escrow
from .client import Connection, call, health, raw
from .kv import artifact_name, export_mount, kv2_mounts

SNAPSHOT = "raft.snap"
BLOCK = 1 << 20


def _connect(source: Mapping[str, Any]) -> tuple[Connection, hvac.Client, dict[str, Any]]:
    conn = Connection.from_mapping(source)
    client = conn.client()
    status = health(client)
    if not status.get("initialized") or status.get("sealed"):
        raise SourceError(f"Vault at {conn.address} is not initialized and unsealed", f"status: {status}")
    if not client.token:
        raise UsageError(f"no Vault token in ${conn.token_env}", "set it, or name a token_file")
    return conn, client, status


def _selected(client: hvac.Client, source: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    mounts = kv2_mounts(client)
    wanted = source.get("kv_mounts")
    if wanted is None:
        return mounts
    names = [m.strip().strip("/") for m in (wanted.split(",") if isinstance(wanted, str) else wanted) if m.strip()]
    missing = [n for n in names if n not in mounts]
    if missing:
        raise SourceError(f"no KV v2 mount {', '.join(missing)} in Vault", f"KV v2 mounts: {sorted(mounts)}")
    return {n: mounts[n] for n in names}


def discover(source: Mapping[str, Any]) -> Inventory:
    _conn, client, status = _connect(source)
    facts = config_facts(client)
    counts = {
        "kv_mounts": len(_selected(client, source)),
        "policies": len(facts["policies"]),
        "auth_mounts": len(facts["auth"]),
    }
    return Inventory(counts=counts, details={"version": status.get("version"), "cluster": status.get("cluster_name")})


def config_facts(client: hvac.Client) -> dict[str, Any]:
    """Policies (name -> SHA-256 of the text), auth and secret mounts (path -> type): what verify compares."""
    names = call("listing policies", client.sys.list_acl_policies)["data"]["keys"]
    policies = {}
    for name in names:
        text = call(f"reading policy {name}", client.sys.read_acl_policy, name)["data"]["policy"]
        policies[name] = hashlib.sha256(text.encode()).hexdigest()
    auth = call("listing auth methods", client.sys.list_auth_methods)
    mounts = call("listing secret engines", client.sys.list_mounted_secrets_engines)
    return {
        "policies": policies,
        "auth": {p: m["type"] for p, m in auth.get("data", auth).items() if isinstance(m, dict)},
        "secret_mounts": {p: m["type"] for p, m in mounts.get("data", mounts).items() if isinstance(m, dict)},
    }


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    conn, client, status = _connect(source)
    seal = call("reading the seal status", client.sys.read_seal_status)
    escrow = _escrow.load(source)
    if escrow is not None and len(escrow.unseal_keys) < int(seal["t"]):
        raise SourceError(
            f"{escrow.held_in} holds {len(escrow.unseal_keys)} unseal keys; the Vault needs {seal['t']}",
            "escrow at least the threshold of keys, or a restore of the snapshot cannot unseal",
        )
    facts = config_facts(client)
    with_snapshot = as_bool(source.get("snapshot"), True)
    snapshot_bytes = _snapshot(client, ctx) if with_snapshot else None
    kv_counts = {}
    for mount, info in _selected(client, source).items():
        with ctx.artifact(artifact_name(mount), meta={"format": "kv2-ndjson", "mount": mount}, sensitive=True) as sink:
            kv_counts[mount] = export_mount(client, mount, info, sink)
    if escrow is not None:
        with ctx.artifact(_escrow.ARTIFACT, meta={"held_in": escrow.held_in}, sensitive=True) as sink:
            sink.write(escrow.to_json())
    return {
        "address": conn.address,
        "version": status.get("version"),
        "cluster_id": status.get("cluster_id"),
        "cluster_name": status.get("cluster_name"),
        "seal": {"type": seal.get("type"), "shares": int(seal["n"]), "threshold": int(seal["t"])},
        "snapshot_bytes": snapshot_bytes,
        "kv": kv_counts,
        "escrow": None
        if escrow is None
        else {"held_in": escrow.held_in, "keys": len(escrow.unseal_keys), "root_token": bool(escrow.root_token)},
        **facts,
        "failure_domain": {"vault_addresses": [conn.address], "vault_hosts": [urlsplit(conn.address).hostname]},
    }


def _snapshot(client: hvac.Client, ctx: BackupContext) -> int:
    resp = call("taking a raft snapshot", raw(client).get, "/v1/sys/storage/raft/snapshot", stream=True)
    size = 0
    progress = ctx.progress("raft snapshot")
    with resp, ctx.artifact(SNAPSHOT, meta={"format": "raft-snapshot"}, sensitive=True) as sink:
        try:
            for block in resp.iter_content(BLOCK):
                sink.write(block)
                size += len(block)
                progress.advance(len(block))
        except requests.RequestException as exc:
            raise SourceError(f"the raft snapshot stream from {client.url} broke: {type(exc).__name__}") from None
    with contextlib.suppress(AttributeError):
        progress.done()
    if size == 0:
        raise SourceError("Vault returned an empty raft snapshot", "is its storage backend raft (integrated)?")
    return size
