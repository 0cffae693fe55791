"""Reading a restore back: each backed-up type read from the target and compared object by object.

Both sides are reduced to the same comparable form (``objects.comparable``): the backup's records after
the restore's namespace mapping, the target's objects cleaned like a backup would clean them, and on both
sides the fields a new cluster chooses itself (ClusterIPs, Job selectors, owner uids...) left out. Objects
that are not equal are judged field by field (``judge``): a field of the backup with another value in the
target fails, naming the field and who owns it now; what the target's controllers, webhooks and people
added is listed with its manager and does not fail. Objects that drift are read again for up to
``settle`` seconds first: a controller finishing its first reconcile of a restored object (Kueue
admitting a restored Job) is not a finding. Per type the check reports counts and a content hash of each
side over the fields the backup holds.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from drtool.plugin.contract import Check, RestoreContext

from .artifacts import CRDS, records
from .client import ApiError, KubeClient
from .crds import condition
from .discovery import CRD_PATH, ResourceType
from .fields import show
from .holds import hold
from .judge import ADDED, FOREIGN_WRITE, STATUS, Judgement, judge
from .objects import comparable_from_live, comparable_from_record, digest, object_key, target_key
from .skips import object_rule
from .transforms import Transforms

MAX_DIFFS = 3  # objects whose failing fields are listed
MAX_FIELDS = 5  # failing fields listed per object
MAX_NAMES = 5
MAX_LISTED = 4  # (manager, field) pairs listed for what the target added
SETTLE_POLL = 1.0


class _Side:
    """Per-object digests of one side."""

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


class _Compare:
    """One type's comparison: the backup's records against the target's objects."""

    def __init__(
        self,
        ctx: RestoreContext,
        client: KubeClient,
        t: ResourceType,
        transforms: Transforms,
        with_status: bool,
        held: bool,
    ) -> None:
        self.ctx, self.client, self.t, self.transforms = ctx, client, t, transforms
        self.ns_map, self.with_status, self.held = transforms.namespaces, with_status, held

    def backup_form(self, rec: dict[str, Any]) -> dict[str, Any]:
        """The backup's object as the restore wrote it: held (``holds``), the plan's transforms applied."""
        if self.held:
            hold(rec, self.t)
        self.transforms.apply(rec["object"], self.t)
        return comparable_from_record(rec, self.t, self.with_status)

    def live_form(self, item: dict[str, Any]) -> dict[str, Any]:
        return comparable_from_live(item, self.t, self.with_status)

    def judge_all(self, differing: dict[str, dict[str, Any]]) -> tuple[dict[str, Judgement], dict[str, Any]]:
        """A second pass over the artifact for the objects that differ: each judged field by field. Returns
        the judgements and the backup's form of those that fail (for ``settle``)."""
        judged, wanted = {}, {}
        for rec in records(self.ctx, self.t):
            key = target_key(rec["object"], self.t, self.ns_map)
            if key in differing:
                mine = self.backup_form(rec)
                judged[key] = judge(key, mine, self.live_form(differing[key]), differing[key])
                if not judged[key].ok:
                    wanted[key] = mine
        return judged, wanted

    def settle(self, judged: dict[str, Judgement], wanted: dict[str, Any], deadline: float) -> list[str]:
        """Read the failing objects again until they hold the backup's fields or the ``deadline``
        (``time.monotonic()``) passes; returns the keys that converged meanwhile."""
        converged = []
        while wanted and time.monotonic() < deadline:
            time.sleep(SETTLE_POLL)
            for key in list(wanted):
                ns, _, name = key.rpartition("/")
                try:
                    item = self.client.get(self.t.path(ns or None, name))
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    continue
                judged[key] = judge(key, wanted[key], self.live_form(item), item)
                if judged[key].ok:
                    del wanted[key]
                    converged.append(key)
        return converged


def check_type(
    ctx: RestoreContext,
    client: KubeClient,
    t: ResourceType,
    transforms: Transforms,
    restore_status: bool,
    settle_until: float = 0.0,
    held: bool = False,
    left_alone: Mapping[str, str] | None = None,
) -> Check:
    """One type compared with the backup as ``transforms`` rewrite it (and as ``holds`` holds it, ``held``);
    drifting objects are read again until ``settle_until`` (``time.monotonic()``: one deadline for a whole
    verify, see ``settle_deadline``). ``left_alone``: keys the restore deliberately did not write (the
    target's newer CRDs, ``versions.py``) -> why; listed, not compared."""
    cmp = _Compare(ctx, client, t, transforms, _with_status(t, restore_status), held)
    ns_map = transforms.namespaces
    backup = _Side()
    namespaces: set[str] = set()
    left_alone = left_alone or {}
    for rec in records(ctx, t):
        key = target_key(rec["object"], t, ns_map)
        if key in left_alone:
            continue
        backup.digests[key] = digest(cmp.backup_form(rec))
        if "/" in key:
            namespaces.add(key.split("/", 1)[0])
    live, extra, differing = _read_target(cmp, backup, namespaces)
    missing = sorted(set(backup.digests) - set(live.digests))
    judged, wanted = cmp.judge_all(differing)
    converged = cmp.settle(judged, wanted, settle_until) if wanted else []
    failing = sorted(k for k, j in judged.items() if not j.ok)
    for key, j in judged.items():
        if j.ok:  # the fields the backup holds are all there, as the backup has them
            live.digests[key] = backup.digests[key]
    present = set(live.digests) & set(backup.digests)
    lines = [
        f"{len(backup.digests)} in backup, {len(present)} in target (+{extra} not in backup); "
        f"hash {backup.hash()} backup, {live.hash(set(backup.digests))} target (the backup's fields)"
    ]
    lines += [f"kept from the target (not compared): {key}: {why}" for key, why in sorted(left_alone.items())]
    if missing:
        lines.append(f"missing: {_names(missing)}")
    if failing:
        lines.append(f"differ: {_names(failing)}")
        lines += _failing_lines([judged[k] for k in failing])
    if converged:
        lines.append(f"settled: {_names(sorted(converged))} held the backup's fields once their controllers caught up")
    lines += _listed_lines(judged.values(), ADDED, "added in the target (not compared)")
    lines += _listed_lines(judged.values(), STATUS, "status kept current by its controller (not compared)")
    return Check(f"kubernetes: {t.key}", not missing and not failing, "\n".join(lines))


def settle_deadline(seconds: float) -> float:
    """The deadline every type of one verify shares: settling is waited for once, not once per type."""
    return time.monotonic() + seconds


def _names(keys: list[str]) -> str:
    more = f" (+{len(keys) - MAX_NAMES} more)" if len(keys) > MAX_NAMES else ""
    return ", ".join(keys[:MAX_NAMES]) + more


def _failing_lines(judgements: list[Judgement]) -> list[str]:
    out = []
    for j in judgements[:MAX_DIFFS]:
        bad = j.failing
        for change in bad[:MAX_FIELDS]:
            label = "drift" if change.kind != FOREIGN_WRITE else FOREIGN_WRITE
            out.append(f"  {label}: {j.key} {change.line()}")
        if len(bad) > MAX_FIELDS:
            out.append(f"  (+{len(bad) - MAX_FIELDS} more fields of {j.key})")
    return out


def _listed_lines(judgements: Iterable[Judgement], kind: str, title: str) -> list[str]:
    """What the target's managers added (or keep current), per manager and field, counted in objects."""
    seen: Counter[tuple[str, str]] = Counter()
    objects = 0
    for j in judgements:
        changes = [c for c in j.changes if c.kind == kind]
        objects += bool(changes)
        for change in changes:
            seen[(", ".join(change.manager_names()), show(change.path))] += 1
    if not seen:
        return []
    shown = [f"{who}: {field} ({n})" for (who, field), n in seen.most_common(MAX_LISTED)]
    more = f"; +{len(seen) - MAX_LISTED} more" if len(seen) > MAX_LISTED else ""
    return [f"{title}: {objects} object(s) — " + "; ".join(shown) + more]


def _read_target(cmp: _Compare, backup: _Side, namespaces: set[str]) -> tuple[_Side, int, dict[str, dict[str, Any]]]:
    """The target's objects of the type that the backup names, and those that differ (kept whole, with their
    managedFields, for ``judge``); counts the others the backup would have selected."""
    t = cmp.t
    live, extra, differing = _Side(), 0, {}
    rule = object_rule(t.key)
    for page in cmp.client.list_pages(t.path(), limit=500):
        for item in page.get("items") or []:
            key = object_key(item)
            if key not in backup.digests:
                in_scope = not t.namespaced or key.split("/", 1)[0] in namespaces
                extra += int(in_scope and not (rule and rule(item)))
                continue
            live.digests[key] = digest(cmp.live_form(item))
            if live.digests[key] != backup.digests[key]:
                differing[key] = item
    return live, extra, differing


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
