"""What an etcd restore contacts and what the new member advertises (independence analysis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import Dependency, RestoreContext

from .client import EtcdSettings
from .restore import RestoreSpec, read_marker


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    """The new member (and its advertised peer URL), and the source only when verify is asked to compare
    with it. The restore itself contacts no old member; the store is added by the core."""
    deps: list[Dependency] = []
    spec = RestoreSpec.parse(target, {})
    marker = read_marker(spec.marker_path) or {}
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
