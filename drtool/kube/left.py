"""What a backup leaves to the target's controllers on purpose, and the check that whoever recreates it is back.

A Deployment's ReplicaSets and Pods, a Job's Pods, Kueue's Workloads, cert-manager's CertificateRequests:
the backup skips them (``skips.py``: restoring them would fight their controllers, or, for a
CertificateRequest, start an issuance), and records each one in a small artifact per type
(``left/<group>/<resource>.ndjson``) with the owner that recreates it. Verify then follows each chain up to
the owner the backup restores (a Pod -> its ReplicaSet, also left -> the Deployment) and checks that owner
exists in the target: a restored Deployment is what brings its Pods back.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from drtool.plugin.contract import Check, RestoreContext

from .artifacts import LEFT_FORMAT as FORMAT
from .artifacts import ndjson, records
from .client import KubeClient
from .discovery import ResourceType
from .objects import dumps, object_key
from .skips import is_apiserver_service

MAX_CHAIN = 8  # owner hops followed (Pod -> ReplicaSet -> Deployment is two)
MAX_NAMES = 5
Obj = dict[str, Any]


def artifact_name(t: ResourceType) -> str:
    return f"left/{t.group or 'core'}/{t.resource}.ndjson"


def artifact_meta(t: ResourceType) -> dict[str, Any]:
    return {"format": FORMAT, "type": t.key}


def recreator(obj: Obj, t: ResourceType) -> Obj | None:
    """The owner that recreates a skipped object: its controller owner reference; for the Endpoints of a
    Service with a selector, that Service (the endpoints controller keeps them by name, without a reference)."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return {k: ref.get(k) for k in ("apiVersion", "kind", "name", "uid")}
    if t.key == "endpoints" and not is_apiserver_service(obj):
        return {"apiVersion": "v1", "kind": "Service", "name": meta.get("name"), "uid": None}
    return None


def record_line(obj: Obj, t: ResourceType, reason: str) -> bytes | None:
    owner = recreator(obj, t)
    if owner is None:
        return None
    meta = obj.get("metadata") or {}
    rec = {"type": t.key, "key": object_key(obj), "uid": meta.get("uid"), "reason": reason, "owner": owner}
    return dumps(rec) + b"\n"


def _left_records(ctx: RestoreContext) -> Iterator[Obj]:
    for art in ctx.artifacts:
        if art.meta.get("format") == FORMAT:
            yield from ndjson(ctx, art.name)


@dataclasses.dataclass(frozen=True)
class Root:
    """The owner a chain of left objects ends at (the first one that was not left out itself)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None
    via: tuple[str, ...]  # kinds of the left owners in between (a Pod's ReplicaSet)

    def show(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def _root(rec: Obj, by_uid: Mapping[str, Obj]) -> Root:
    owner, via = rec["owner"], []
    for _ in range(MAX_CHAIN):
        above = by_uid.get(owner.get("uid") or "")
        if above is None:
            break
        via.append(owner["kind"])
        owner = above["owner"]
    namespace = rec["key"].rpartition("/")[0]
    return Root(owner.get("apiVersion", ""), owner.get("kind", ""), namespace, owner.get("name", ""),
                owner.get("uid"), tuple(via))  # fmt: skip


def check_left(
    ctx: RestoreContext, client: KubeClient, types: list[ResourceType], ns_map: Mapping[str, str]
) -> Check | None:
    """Every object the backup left to controllers has its recreating owner restored and present."""
    left = list(_left_records(ctx))
    if not left:
        return None
    by_uid = {r["uid"]: r for r in left if r.get("uid")}
    roots = [(r, _root(r, by_uid)) for r in left]
    by_kind = {(t.group, t.kind): t for t in types}
    restored = _restored_uids(ctx, by_kind, {root for _, root in roots})
    missing: dict[str, set[str]] = {}
    present_cache: dict[str, set[str]] = {}
    unchecked: Counter[str] = Counter()
    per_type: dict[str, Counter[str]] = {}
    for rec, root in roots:
        t = by_kind.get((root.api_version.rpartition("/")[0], root.kind))
        if t is None or (root.uid and root.uid not in restored):
            unchecked[root.kind] += 1
            continue
        namespace = ns_map.get(root.namespace, root.namespace) if t.namespaced else ""
        key = f"{namespace}/{root.name}" if namespace else root.name
        if t.key not in present_cache:
            present_cache[t.key] = {object_key(i) for p in client.list_pages(t.path()) for i in p.get("items") or []}
        if key not in present_cache[t.key]:
            missing.setdefault(f"{root.kind} {key}", set()).add(rec["type"])
        label = root.kind + (f" via {'/'.join(root.via)}" if root.via else "")
        per_type.setdefault(rec["type"], Counter())[label] += 1
    lines = [f"{len(left)} object(s) left to the target's controllers on purpose, by the owner that recreates them:"]
    for type_key, owners in sorted(per_type.items()):
        lines.append(f"  {type_key} {sum(owners.values())} ({', '.join(f'{k} {n}' for k, n in owners.items())})")
    if unchecked:
        lines.append(f"  owner not in this backup (not checked): {', '.join(f'{k} {n}' for k, n in unchecked.items())}")
    if missing:
        shown = [f"{owner} (recreates {', '.join(sorted(kinds))})" for owner, kinds in sorted(missing.items())]
        more = f" (+{len(shown) - MAX_NAMES} more)" if len(shown) > MAX_NAMES else ""
        lines.append("owner missing in the target: " + "; ".join(shown[:MAX_NAMES]) + more)
    return Check("kubernetes: left to controllers", not missing, "\n".join(lines))


def _restored_uids(ctx: RestoreContext, by_kind: Mapping[tuple[str, str], ResourceType], roots: set[Root]) -> set[str]:
    """The uids (in the source) of the roots that the backup holds: one pass over the owners' types only."""
    wanted = {root.uid for root in roots if root.uid}
    kinds = {(root.api_version.rpartition("/")[0], root.kind) for root in roots}
    found: set[str] = set()
    for kind in kinds:
        t = by_kind.get(kind)
        if t is not None:
            found.update(r["uid"] for r in records(ctx, t) if r.get("uid") in wanted)
    return found
