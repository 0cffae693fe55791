"""Did the Kueue configuration arrive whole? The target read back and compared with the backup.

Two views, both needed: object by object (the toolkit's ``check_type``: counts, content hashes,
a diff of what differs), and Kueue's own meaning — quotas per ClusterQueue/Cohort, flavor and resource,
LocalQueue -> ClusterQueue, the cohort tree, every reference resolving in the target, and no ClusterQueue
that Kueue reports Inactive. Objects the target has beyond the backup are listed, not failed.
Without a Kueue controller in the target (the lab runs none) no status is computed: a ClusterQueue then
has no ``Active`` condition at all, which the check says instead of guessing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.kube.apply import Existing
from drtool.kube.client import KubeClient
from drtool.kube.discovery import ResourceType
from drtool.kube.readings import conditions, is_true, status_by_controller
from drtool.kube.verify import check_type, crds_established, settle_deadline
from drtool.plugin.contract import Check, RestoreContext

from .bundle import Bundle, load
from .cluster import Served, connect, list_objects, served
from .diff import LinkChange, QuotaChange, compare_links, compare_quotas, live_objects
from .kinds import CHECKS, CLUSTER_QUEUES, CRDS, FLAVORS, NAMESPACES
from .quotas import View
from .restore import Options, check_references
from .verdicts import active_checks, check_states, unsettled

MAX_LISTED = 5
SETTLE_POLL = 0.5  # seconds between reads of Kueue's verdicts while they settle
# Kueue re-judges a queue only once its informers have seen the flavors and checks the queue names; on a
# loaded control plane that took over 30 s (the default settle) after an in-place restore, so a queue's
# verdict is waited for at least this long before a new Inactive counts as a failure.
VERDICT_WAIT = 120.0


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    opts = Options.parse(target, options)
    if opts.base.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    try:
        bundle = load(ctx)
        client = connect(target)
        here = served(client)
        live = live_objects(client, here)
    except DrtoolError as exc:
        return [Check("kueue: target reachable", False, exc.one_line())]
    until = settle_deadline(opts.base.settle)
    checks = [
        _guard(t.key, lambda t=t: _renamed(check_type(ctx, client, t, opts.base.transforms, False, settle_until=until)))
        for t in _compared(bundle)
    ]
    checks.append(
        _guard("CRDs Established", lambda: _renamed(crds_established(ctx, client, list(bundle.types.values()))))
    )
    checks.append(_guard("namespaces", lambda: namespaces_exist(bundle, client, here)))
    checks += semantic_checks(View.build(bundle.objects()), View.build(live))
    allowed = set(opts.allow_missing)
    checks.append(_guard("references", lambda: references_resolve(bundle, client, here, allowed)))
    was = dict(ctx.plugin_meta.get("inactive_in_source") or {})
    verdicts_until = settle_deadline(max(opts.base.settle, VERDICT_WAIT)) if opts.base.settle else until
    checks.append(_guard("ClusterQueues Active", lambda: settled_queues(bundle, client, here, was, verdicts_until)))
    return checks


def settled_queues(bundle: Bundle, client: KubeClient, here: Served, was: Mapping[str, str], until: float) -> Check:
    """Kueue's verdicts, judged once they pass and are settled (verdicts.py), or at ``until``: a just-restored
    ClusterQueue is briefly Inactive while Kueue has not yet seen the flavor or AdmissionCheck it names, or
    while a check's controller has not yet reported the restored check Active. Without a verdict of the
    target's own (none at all, or only the source's, copied with the status by a restore) no Kueue controller
    has judged in the target: nothing to wait for (a bare target waited the whole ``VERDICT_WAIT`` for nothing)."""
    names = bundle.names(CLUSTER_QUEUES)
    kueue = here.kueue()
    while True:
        queues = [cq for cq in live_objects(client, here).get(CLUSTER_QUEUES, []) if cq["metadata"]["name"] in names]
        check = queues_active(bundle, queues, was)
        if not any(conditions(cq).get("Active") and status_by_controller(cq) for cq in queues):
            return check
        flavors = {f["metadata"]["name"] for f in list_objects(client, kueue[FLAVORS])} if FLAVORS in kueue else set()
        checks = active_checks(list_objects(client, kueue[CHECKS])) if CHECKS in kueue else {}
        waiting = [why for cq in queues if (why := unsettled(cq, flavors, checks))]
        if (check.ok and not waiting) or time.monotonic() >= until:
            break
        time.sleep(SETTLE_POLL)
    lines = [f"not settled: {w}" for w in waiting]
    if not check.ok:
        held = [cq for cq in queues if not is_true(cq, "Active")]
        lines += [f"{cq['metadata']['name']}: {line}" for cq in held if (line := check_states(cq, checks))]
    return Check(check.name, check.ok, "\n".join([check.detail, *lines[: MAX_LISTED + 1]]))


def _compared(bundle: Bundle) -> list[ResourceType]:
    """Types compared object by object: not CRDs (a target's own Kueue CRDs may be newer) and not
    namespaces (an existing one keeps its labels: only existence is checked)."""
    return [t for k, t in sorted(bundle.types.items()) if k not in (CRDS, NAMESPACES)]


def _renamed(check: Check) -> Check:
    return Check(check.name.replace("kubernetes:", "kueue:", 1), check.ok, check.detail)


def _guard(name: str, fn: Callable[[], Check]) -> Check:
    try:
        return fn()
    except DrtoolError as exc:
        return Check(f"kueue: {name}", False, exc.one_line())


def _names(items: list[str]) -> str:
    more = f" (+{len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


def namespaces_exist(bundle: Bundle, client: KubeClient, here: Served) -> Check:
    """Only existence: a namespace that was already there keeps its own labels (the restore leaves it)."""
    wanted = sorted(bundle.names(NAMESPACES))
    present = set(Existing(client).of(here.types[NAMESPACES]) or {}) if wanted else set()
    absent = [n for n in wanted if n not in present]
    return Check("kueue: namespaces", not absent, f"missing: {_names(absent)}" if absent else f"{len(wanted)} present")


def semantic_checks(backup: View, target: View) -> list[Check]:
    """Quotas, LocalQueue -> ClusterQueue, cohort tree: what differs for the backup's objects fails."""
    quotas = compare_quotas(backup, target)
    links = compare_links(backup, target)
    wiring = [c for c in links if c.kind == "LocalQueue"]
    tree = [c for c in links if c.kind != "LocalQueue"]
    return [
        _check("quotas", quotas, len(backup.quotas), "quota entries (queue, flavor, resource)", _quota_line),
        _check("LocalQueue -> ClusterQueue", wiring, len(backup.local_queues), "LocalQueues", _link_line),
        _check(
            "cohort tree",
            tree,
            len(backup.parent_of) + len(backup.cohort_of),
            "Cohort parents and CQ cohorts",
            _link_line,
        ),
    ]


def _quota_line(q: QuotaChange) -> str:
    return f"{q.key}: {q.state}" + (
        f" ({', '.join(f'{f} {q.cell(f)}' for f in q.fields)})" if q.backup and q.target else ""
    )


def _link_line(c: LinkChange) -> str:
    return f"{c.kind} {c.name} {c.field}: {c.backup!r} → {c.target!r}"


def _check(name: str, changes: list[Any], total: int, what: str, line: Callable[[Any], str]) -> Check:
    bad = [c for c in changes if c.backup is not None]
    extra = len(changes) - len(bad)
    detail = f"{total - len(bad)} of {total} {what} equal" + (f" (+{extra} only in target)" if extra else "")
    if bad:
        detail += "\n" + "\n".join(line(c) for c in bad[:MAX_LISTED])
    return Check(f"kueue: {name}", not bad, detail)


def references_resolve(bundle: Bundle, client: KubeClient, here: Served, allowed: set[str]) -> Check:
    """Every name the restored objects carry exists in the target (itself, not in the backup)."""
    refs = check_references(bundle, client, here, Existing(client), in_backup=False)
    bad = [m for m in refs if m.rule not in allowed]
    lines = [f"{m} ({m.effect})" for m in bad[:MAX_LISTED]]
    accepted = len(refs) - len(bad)
    if accepted:
        lines.append(f"{accepted} missing reference(s) accepted by allow_missing")
    return Check("kueue: references", not bad, "\n".join(lines) or "every reference resolves in the target")


def queues_active(bundle: Bundle, live: list[dict[str, Any]], inactive_in_source: Mapping[str, str]) -> Check:
    """Kueue's own verdict, where a controller has given one: no restored ClusterQueue may be Inactive — unless
    the source's Kueue said the same of it, for the same reason (the restore reproduced the source)."""
    names = bundle.names(CLUSTER_QUEUES)
    verdicts: dict[str, dict[str, Any]] = {}
    for cq in live:
        if cq["metadata"]["name"] in names:
            active = conditions(cq).get("Active")
            if active is not None:
                verdicts[cq["metadata"]["name"]] = active
    inactive = {n: c for n, c in sorted(verdicts.items()) if c.get("status") != "True"}
    as_before = {n for n, c in inactive.items() if inactive_in_source.get(n) == c.get("reason")}
    unknown = len(names) - len(verdicts)
    detail = f"{len(verdicts) - len(inactive)} of {len(names)} ClusterQueues Active"
    if unknown:
        detail += f"; {unknown} without an Active condition (no Kueue controller has reported status in the target)"
    new = {n: c for n, c in inactive.items() if n not in as_before}
    lines = [f"{n}: {c.get('reason')} {c.get('message', '')}".strip() for n, c in new.items()]
    if as_before:
        lines.append(f"inactive in the source too, for the same reason: {', '.join(sorted(as_before))}")
    if lines:
        detail += "\n" + "\n".join(lines[: MAX_LISTED + 1])
    return Check("kueue: ClusterQueues Active", len(inactive) == len(as_before), detail)
