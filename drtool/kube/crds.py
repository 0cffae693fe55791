"""Waiting for restored CRDs: custom resources can be created only once their CRD is Established and the
API server serves its resources (Velero's CRs-before-CRD failures, vmware-tanzu/velero#3844)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from drtool.errors import SourceError

from .client import ApiError, KubeClient
from .discovery import CRD_PATH, ResourceType

_POLL = 0.2


def condition(crd: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (crd.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _not_ready(client: KubeClient, names: Iterable[str]) -> dict[str, str]:
    """CRD name -> why it is not ready yet (missing, or a condition not True, with the server's message)."""
    waiting = {}
    for name in names:
        try:
            crd = client.get(f"{CRD_PATH}/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            waiting[name] = "not found"
            continue
        for kind in ("NamesAccepted", "Established"):
            cond = condition(crd, kind)
            if cond.get("status") != "True":
                waiting[name] = f"{kind} {cond.get('status', 'unknown')}: {cond.get('message', '')}".strip()
                break
    return waiting


def _served(client: KubeClient, t: ResourceType) -> bool:
    try:
        client.get(t.path(), {"limit": 1})
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def wait_established(client: KubeClient, opts: Any, types: list[ResourceType]) -> None:
    """Block until every CRD of the backup is Established and each of its resource types answers."""
    names = {f"{t.resource}.{t.group}" for t in types}
    deadline = time.monotonic() + opts.crd_timeout
    pending_types = list(types)
    while True:
        waiting = _not_ready(client, names)
        names = set(waiting)
        if not waiting:
            pending_types = [t for t in pending_types if not _served(client, t)]
            if not pending_types:
                return
        if time.monotonic() > deadline:
            what = "; ".join(f"{n}: {why}" for n, why in sorted(waiting.items())[:3]) or ", ".join(
                t.key for t in pending_types[:3]
            )
            raise SourceError(
                f"CRDs not ready after {opts.crd_timeout:.0f}s in {client.server}: {what}",
                "check the CRDs' conditions (kubectl get crd NAME -o yaml); raise crd_timeout if the server is slow",
            )
        time.sleep(_POLL)
