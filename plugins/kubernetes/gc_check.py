"""`gc-stable`: the garbage collector leaves the restored platform alone. A dependent restored with an
owner reference the new cluster cannot resolve (a stale uid, an owner not restored) looks fine when read
back, and the collector deletes it a moment later. The check lists the metadata of every object in scope,
keeps those drtool's restore wrote and everything below them in owner chains (a restored Deployment's
ReplicaSet and Pods; JobSets under restored TrainJobs), proves the collector runs by giving it a probe
whose owner never existed and waiting until it is collected, waits ``window`` seconds more, and lists
again: every object must still be there with the same uid and no deletion pending. A dependent whose owner
is already gone, or that is being deleted, fails at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from drtool.durations import Duration, format_duration
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import ResourceType, crd_index, discover
from drtool.kube.readings import METADATA_LIST, PROBE_MANAGER, items, restored, wait_for
from drtool.kube.skips import resource_skip_reason
from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, NamespaceList, PlatformCheck, Verdict


class GcStableCheck(CheckSettings):
    """The garbage collector has run for ``window`` and every restored object (and its dependents) is there."""

    type: Literal["gc-stable"]
    namespaces: NamespaceList = Field(default_factory=list)
    window: Duration = dt.timedelta(seconds=30)  # after the collector proved it runs by collecting a probe
    timeout: Duration = dt.timedelta(minutes=1)  # for that probe to be collected

    def summary(self) -> str:
        return f"restored objects and their dependents survive {format_duration(self.window)} of garbage collection"


@dataclasses.dataclass(frozen=True)
class Seen:
    uid: str
    kind: str
    namespace: str
    name: str
    api_version: str
    owners: tuple[tuple[str, str, str], ...]  # (kind, name, uid) of each owner reference
    deleting: bool
    restored: bool
    custom: bool  # a custom resource

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def _listable(client: KubeClient) -> list[ResourceType]:
    types, _stale = discover(client, crd_index(client))
    return [t for t in types if "list" in t.verbs and not resource_skip_reason(t.resource, t.group)]


def in_scope(types: Iterable[ResourceType], namespaces: list[str]) -> list[ResourceType]:
    """Every type, or with ``namespaces`` the namespaced ones (cluster-scoped objects are in no namespace)."""
    return [t for t in types if t.namespaced or not namespaces]


def snapshot(client: KubeClient, types: Iterable[ResourceType], namespaces: list[str]) -> dict[str, Seen]:
    """Metadata of every object of ``types`` in ``namespaces`` (all when empty), by uid."""
    seen: dict[str, Seen] = {}
    for t in types:
        for path in [t.path(ns) for ns in namespaces] if namespaces else [t.path()]:
            try:
                objects = list(items(client, path, accept=METADATA_LIST))
            except ApiError as exc:
                if exc.status in (403, 404, 405):  # not listable here after all (an aggregated API gone)
                    continue
                raise
            for obj in objects:
                meta = obj["metadata"]
                refs = meta.get("ownerReferences") or []
                owners = tuple((o.get("kind", ""), o.get("name", ""), o.get("uid", "")) for o in refs)
                seen[meta["uid"]] = Seen(
                    meta["uid"], t.kind, meta.get("namespace", ""), meta["name"], t.api_version, owners,
                    bool(meta.get("deletionTimestamp")), restored(obj), t.crd,
                )  # fmt: skip
    return seen


def watched(objects: dict[str, Seen]) -> dict[str, Seen]:
    """Restored objects and every object whose owner chain leads to one."""
    keep = {uid for uid, o in objects.items() if o.restored}
    children: dict[str, list[str]] = {}
    for uid, o in objects.items():
        for _kind, _name, owner in o.owners:
            children.setdefault(owner, []).append(uid)
    frontier = list(keep)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in keep:
                keep.add(child)
                frontier.append(child)
    return {uid: objects[uid] for uid in keep}


def chain(objects: dict[str, Seen], obj: Seen) -> list[Seen]:
    """``obj`` and its owners up to the top, top first (following the first owner present)."""
    path = [obj]
    while len(path) < 16:
        owner = next((objects[u] for _k, _n, u in path[0].owners if u in objects), None)
        if owner is None:
            break
        path.insert(0, owner)
    return path


def orphans(objects: dict[str, Seen], keep: dict[str, Seen], kinds: set[str]) -> list[str]:
    """Watched objects the collector will delete: an owner of a listed kind is gone, or deletion is pending."""
    found = []
    for o in keep.values():
        gone = [(k, n, u) for k, n, u in o.owners if k in kinds and u not in objects]
        if gone:
            k, n, u = gone[0]
            found.append(f"{o.ref} (its owner {k} {n} uid {u} does not exist)")
        elif o.deleting:
            found.append(f"{o.ref} (being deleted)")
    return found


def prove_collector_runs(client: KubeClient, namespace: str, timeout: float) -> tuple[bool, str]:
    """Create a ConfigMap whose owner never existed and wait until the garbage collector deletes it."""
    name = f"drtool-gc-probe-{secrets.token_hex(3)}"
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": f"{name}-owner", "uid": str(uuid.uuid4())}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [owner]}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    client.request("POST", path, params={"fieldManager": PROBE_MANAGER}, body=json.dumps(body).encode(), ok=(201,))

    def collected() -> tuple[bool | None, str]:
        status = client.request("GET", f"{path}/{name}", ok=(200, 404)).status
        return (True, "") if status == 404 else (None, "not collected")

    done, _ = wait_for(collected, timeout)
    if not done:
        client.request("DELETE", f"{path}/{name}", ok=(200, 202, 404))
        return False, f"probe ConfigMap {namespace}/{name} (owner never existed) not collected"
    return True, ""


def run(check: GcStableCheck, ctx: CheckRun, watch: CheckWatch) -> Verdict:
    client = ctx.kube()
    types = in_scope(_listable(client), check.namespaces)
    before = snapshot(client, types, check.namespaces)
    keep = watched(before)
    if not any(o.restored for o in keep.values()):
        return Verdict(False, "no object written by drtool's restore found on the target")
    doomed = orphans(before, keep, {t.kind for t in types})
    if doomed:
        named = "; ".join(doomed[:3])
        return Verdict(False, f"{len(doomed)} restored object(s) the garbage collector deletes: {named}")
    started = time.monotonic()
    runs, why = prove_collector_runs(client, (check.namespaces or ["default"])[0], check.timeout.total_seconds())
    if not runs:
        return Verdict(False, f"the garbage collector is not running: {why} within {format_duration(check.timeout)}")
    collector_s = time.monotonic() - started
    watch.green()
    time.sleep(check.window.total_seconds())
    kinds = {(o.api_version, o.kind) for o in keep.values()}
    after = snapshot(client, [t for t in types if (t.api_version, t.kind) in kinds], check.namespaces)
    lost = [o for uid, o in keep.items() if uid not in after or after[uid].deleting]
    if lost:
        names = "; ".join(" -> ".join(x.ref for x in chain(before, o)) for o in lost[:3])
        return Verdict(False, f"{len(lost)} object(s) deleted within {format_duration(check.window)}: {names}")
    return _stable(before, keep, collector_s, check)


def _stable(before: dict[str, Seen], keep: dict[str, Seen], collector_s: float, check: GcStableCheck) -> Verdict:
    owners = {u for o in keep.values() for _k, _n, u in o.owners}
    chains = [chain(before, o) for uid, o in keep.items() if uid not in owners]  # from each end of a chain
    deepest = max(chains, key=len)
    custom_owners = sorted({f"{c[-2].kind} -> {c[-1].kind}" for c in chains if len(c) > 1 and c[-2].custom})
    restored_count = sum(o.restored for o in keep.values())
    facts = {
        "restored": restored_count,
        "dependents": len(keep) - restored_count,
        "owner_chains": dict(Counter(" -> ".join(o.kind for o in c) for c in chains if len(c) > 1)),
        "deepest_chain": [o.ref for o in deepest],
        "custom_resource_owners": custom_owners,
        "collector_probe_s": round(collector_s, 3),
    }
    detail = (
        f"{restored_count} restored objects and {len(keep) - restored_count} dependents still there "
        f"{format_duration(check.window)} after the collector took its probe ({collector_s:.1f}s); "
        f"deepest owner chain {len(deepest)}: {' -> '.join(o.ref for o in deepest)}"
    )
    if custom_owners:
        detail += f"; custom-resource owners: {', '.join(custom_owners)}"
    return Verdict(True, detail, facts)


CHECK = PlatformCheck("gc-stable", GcStableCheck, run, reads_cluster=True)
