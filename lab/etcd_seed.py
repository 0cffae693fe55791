"""Kubernetes-shaped content for a lab etcd, written with plain HTTP (not the etcd plugin's client).

The demo and the tests seed through this module; tests read back with their own code, so a bug in the
plugin cannot hide itself in both the write and the check.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from drtool.servers.etcd import EtcdServer

SEED_KEYS = 3000
BIG_VALUE = 300 * 1024  # bigger than one 32 KiB snapshot message and one chunk of the gateway's stream
TXN_OPS = 100  # etcd's default --max-txn-ops is 128


def settings_of(server: EtcdServer) -> dict[str, str]:
    """Plugin source settings for a lab etcd (what ETCD_* would say), without touching os.environ."""
    return {k.removeprefix("ETCD_").lower(): v for k, v in server.env().items()}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def gateway(settings: Mapping[str, Any], path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON-gateway call with plain requests (independent of the plugin's client)."""
    endpoint = str(settings["endpoints"]).split(",")[0]
    cert = (settings["cert"], settings["key"]) if settings.get("cert") else None
    resp = requests.post(
        f"{endpoint}{path}", json=dict(body), verify=settings.get("cacert") or True, cert=cert, timeout=30
    )
    resp.raise_for_status()
    return resp.json()


def seed_items(n: int = SEED_KEYS) -> Iterator[tuple[bytes, bytes]]:
    """Distinctive keys and values: Kubernetes-like paths, binary keys and values, empty and big values."""
    for i in range(n):
        kind = ("secrets", "configmaps", "pods", "leases")[i % 4]
        key = f"/registry/{kind}/ns-{i % 13}/obj-{i:05d}".encode()
        if i % 5 == 0:
            value = bytes([0, 255, 10, 13]) + i.to_bytes(4, "big") + os.urandom(24)
        else:
            value = json.dumps({"kind": kind, "n": i, "data": "é✓" * (i % 7)}).encode()
        yield key, value
    yield b"\xff\x00binary\nkey\x00", b"\x00" * 17
    yield b"/empty/value", b""
    yield b"/big/value", os.urandom(BIG_VALUE)


def seed(settings: Mapping[str, Any], n: int = SEED_KEYS) -> int:
    """Write the seed in transactions, then overwrite and delete some keys so history has depth."""
    items = list(seed_items(n))
    for start in range(0, len(items), TXN_OPS):
        ops = [{"request_put": {"key": _b64(k), "value": _b64(v)}} for k, v in items[start : start + TXN_OPS]]
        gateway(settings, "/v3/kv/txn", {"success": ops})
    for i in range(0, n, 97):  # versions > 1 and tombstones: the restore must keep revisions exactly
        key = items[i][0]
        gateway(settings, "/v3/kv/put", {"key": _b64(key), "value": _b64(b"rewritten:" + key)})
        gateway(settings, "/v3/kv/deleterange", {"key": _b64(items[i + 1][0])})
    lease = gateway(settings, "/v3/lease/grant", {"TTL": 3600})["ID"]
    gateway(settings, "/v3/kv/put", {"key": _b64(b"/leased/key"), "value": _b64(b"held"), "lease": lease})
    return int(gateway(settings, "/v3/maintenance/status", {})["header"]["revision"])
