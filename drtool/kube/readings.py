"""Small readings of a live cluster that the platform checks share (the kubernetes, kueue, dns-certs and
checkpoints plugins contribute them, drtool.plugin.checks): conditions, who wrote an object, metadata-only
lists, a client for the restored cluster, and waiting for a controller with the reason it has not acted yet."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from drtool.errors import UsageError
from drtool.kube.client import FIELD_MANAGER, KubeClient
from drtool.kube.fields import managers
from drtool.kube.settings import Connection

T = TypeVar("T")
PROBE_MANAGER = "drtool-check"  # field manager of what checks create (probes), never mistaken for restored
RESTORE_MANAGER = FIELD_MANAGER  # what drtool's restores write with: an object holding its fields was restored
Obj = dict[str, Any]
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
POLL_S = 0.5


def conditions(obj: Mapping[str, Any]) -> dict[str, Obj]:
    """The object's status conditions by type."""
    return {c["type"]: c for c in ((obj.get("status") or {}).get("conditions") or []) if "type" in c}


def is_true(obj: Mapping[str, Any], condition: str) -> bool:
    return conditions(obj).get(condition, {}).get("status") == "True"


def restored(obj: Mapping[str, Any]) -> bool:
    """Written by drtool's restore: its field manager holds fields of the object."""
    return any(e.get("manager") == RESTORE_MANAGER for e in (obj.get("metadata") or {}).get("managedFields") or [])


def status_by_controller(obj: Mapping[str, Any]) -> bool:
    """Its status was written by something other than drtool (a controller's own verdict), not only copied from
    the backup by a restore or written by a check's probe."""
    return any(m.subresource == "status" and m.name not in (RESTORE_MANAGER, PROBE_MANAGER) for m in managers(obj))


def ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {where}{meta.get('name')}"


def items(
    client: KubeClient, path: str, params: Mapping[str, str] | None = None, *, accept: str = "application/json"
) -> Iterator[Obj]:
    """Every object of a LIST, page by page."""
    for page in client.list_pages(path, params, accept=accept):
        yield from page.get("items") or []


def in_namespaces(namespaces: Iterable[str], path_of: Callable[[str | None], str]) -> list[str]:
    """The LIST paths for ``namespaces`` (empty: one cluster-wide path)."""
    chosen = list(namespaces)
    return [path_of(ns) for ns in chosen] if chosen else [path_of(None)]


def wait_for(probe: Callable[[], tuple[T | None, str]], timeout: float) -> tuple[T | None, str]:
    """Call ``probe`` (returning a result, or None and why not yet) until it gives a result or ``timeout``
    passes; returns the result, or None with the last reason (which a failed check reports)."""
    deadline = time.monotonic() + timeout
    while True:
        result, why = probe()
        if result is not None or time.monotonic() >= deadline:
            return result, why
        time.sleep(POLL_S)


def cluster_client(cluster: Mapping[str, Any]) -> KubeClient:
    """A client of the restored cluster: ``cluster`` is its target (a check's ``context.cluster()``)."""
    if not cluster.get("kubeconfig") or "${" in str(cluster["kubeconfig"]):
        raise UsageError("no kubeconfig: no target of the plan names the restored cluster (`kubeconfig`)")
    return KubeClient(Connection.from_mapping({**cluster, "timeout": 30}))
