"""Reading a restore back: each backed-up type read from the target and compared object by object.

Both sides are reduced to the same comparable form (``objects.comparable``): the backup's records after
the restore's namespace mapping, the target's objects cleaned like a backup would clean them, and on both
sides the fields a new cluster chooses itself (ClusterIPs, Job selectors, owner uids...) left out. Per
type the check reports counts and a content hash of each side, and for up to ``MAX_DIFFS`` differing
objects a unified diff of their YAML.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from drtool.plugin.contract import Check, RestoreContext

from .artifacts import CRDS, records
from .client import KubeClient
from .crds import condition
from .discovery import CRD_PATH, ResourceType
from .objects import comparable_from_live, comparable_from_record, digest, object_key, target_key
from .references import map_images
from .skips import object_rule

MAX_DIFFS = 3
MAX_NAMES = 5


class _Side:
    """Per-object digests of one side, and the comparable objects kept for diffs."""

    def __init__(self) -> None:
        self.digests: dict[str, str] = {}

    def hash(self, keys: set[str] | None = None) -> str:
        h = hashlib.sha256()
        for key in sorted(keys if keys is not None else self.digests):
            if key in self.digests:
                h.update(f"{key} {self.digests[key]}\n".encode())
        return h.hexdigest()[:16]


def _with_status(t: ResourceType, restore_status: bool) -> bool:
    """Status is compared where the restore writes it: custom resources (in the object when the CRD has no
    /status subresource, through /status when restore_status). Built-ins' status is their controllers'."""
    return t.crd and (not t.status or restore_status)


def check_type(
    ctx: RestoreContext,
    client: KubeClient,
    t: ResourceType,
    ns_map: Mapping[str, str],
    restore_status: bool,
    image_map: Mapping[str, str] | None = None,
) -> Check:
    with_status = _with_status(t, restore_status)
    backup = _Side()
    namespaces: set[str] = set()
    for rec in records(ctx, t):
        key = target_key(rec["object"], t, ns_map)
        backup.digests[key] = digest(comparable_from_record(_mapped(rec, image_map), t, ns_map, with_status))
        if "/" in key:
            namespaces.add(key.split("/", 1)[0])
    live, extra, differing = _read_target(client, t, backup, namespaces, with_status)
    missing = sorted(set(backup.digests) - set(live.digests))
    differ = sorted(k for k in backup.digests if k in live.digests and live.digests[k] != backup.digests[k])
    ok = not missing and not differ
    lines = [
        f"{len(backup.digests)} in backup, {len(set(live.digests) & set(backup.digests))} in target"
        f" (+{extra} not in backup); hash {backup.hash()} backup, {live.hash(set(backup.digests))} target"
    ]
    if missing:
        lines.append(f"missing: {_names(missing)}")
    if differ:
        lines.append(f"differ: {_names(differ)}")
        shown = {k: differing[k] for k in differ[:MAX_DIFFS] if k in differing}
        lines += _diffs(ctx, t, ns_map, with_status, shown, image_map)
    return Check(f"kubernetes: {t.key}", ok, "\n".join(lines))


def _names(keys: list[str]) -> str:
    more = f" (+{len(keys) - MAX_NAMES} more)" if len(keys) > MAX_NAMES else ""
    return ", ".join(keys[:MAX_NAMES]) + more


def _read_target(
    client: KubeClient, t: ResourceType, backup: _Side, namespaces: set[str], with_status: bool
) -> tuple[_Side, int, dict[str, dict[str, Any]]]:
    """The target's objects of ``t`` that the backup names; counts the others it would have selected."""
    live, extra, differing = _Side(), 0, {}
    rule = object_rule(t.key)
    for page in client.list_pages(t.path(), limit=500):
        for item in page.get("items") or []:
            key = object_key(item)
            if key not in backup.digests:
                in_scope = not t.namespaced or key.split("/", 1)[0] in namespaces
                extra += int(in_scope and not (rule and rule(item)))
                continue
            obj = comparable_from_live(item, t, with_status)
            live.digests[key] = digest(obj)
            if live.digests[key] != backup.digests[key] and len(differing) < MAX_DIFFS:
                differing[key] = obj
    return live, extra, differing


def _mapped(rec: dict[str, Any], image_map: Mapping[str, str] | None) -> dict[str, Any]:
    """The record with its images pointed where the restore pointed them (``image_registry_map``)."""
    if image_map:
        map_images(rec["object"], image_map)
    return rec


def _diffs(
    ctx: RestoreContext,
    t: ResourceType,
    ns_map: Mapping[str, str],
    with_status: bool,
    live: dict[str, Any],
    image_map: Mapping[str, str] | None = None,
) -> list[str]:
    """Unified YAML diffs (backup -> target) of a few differing objects: a second pass over the artifact."""
    out = []
    for rec in records(ctx, t):
        key = target_key(rec["object"], t, ns_map)
        if key in live:
            mine = comparable_from_record(_mapped(rec, image_map), t, ns_map, with_status)
            want = yaml.safe_dump(mine, sort_keys=True)
            got = yaml.safe_dump(live[key], sort_keys=True)
            diff = difflib.unified_diff(
                want.splitlines(), got.splitlines(), f"backup {key}", f"target {key}", lineterm="", n=2
            )
            out.extend(diff)
    return out


def crds_established(ctx: RestoreContext, client: KubeClient, types: list[ResourceType]) -> Check:
    crd_type = next((t for t in types if t.key == CRDS), None)
    names = [rec["object"]["metadata"]["name"] for rec in records(ctx, crd_type)] if crd_type else []
    bad = []
    for name in names:
        crd = client.get(f"{CRD_PATH}/{name}")
        for cond in ("Established", "NamesAccepted"):
            if condition(crd, cond).get("status") != "True":
                bad.append(f"{name} not {cond}")
    return Check("kubernetes: CRDs Established", not bad, _names(bad) if bad else f"{len(names)} CRDs Established")


def nothing_terminating(
    ctx: RestoreContext, client: KubeClient, types: list[ResourceType], ns_map: Mapping[str, str]
) -> Check:
    """A restored namespace stuck Terminating (finalizers without their controller) loses everything in it."""
    ns_type = next((t for t in types if t.key == "namespaces"), None)
    names = [target_key(r["object"], ns_type, ns_map) for r in records(ctx, ns_type)] if ns_type else []
    stuck = []
    for name in names:
        ns = client.get(f"/api/v1/namespaces/{name}") if name else {}
        if (ns.get("status") or {}).get("phase") == "Terminating":
            stuck.append(name)
    return Check("kubernetes: nothing Terminating", not stuck, _names(stuck) if stuck else f"{len(names)} namespaces")
