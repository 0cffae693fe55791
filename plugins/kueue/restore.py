"""Restore Kueue's configuration into a cluster, in Kueue's dependency order (``kinds.ORDER``).

1. Read the whole backup (``bundle.load``): the store verifies every artifact before anything is written.
2. Check the target: it must serve each kind in the backup's version, or lack the CRD (installed then).
3. Check references (``refs.RULES``) against the backup and the target; any missing one stops the
   restore here, with nothing written, unless ``allow_missing`` names its kind.
4. With ``existing: fail``, stop if an object exists in the target with other content.
5. Install the Kueue CRDs the target lacks, wait until they are Established; then every level in order,
   the objects of one level concurrently, Cohorts parents first. Writes are the toolkit's
   server-side apply (``Applier``), so a second run changes nothing and says so.
Status is never written: Kueue computes it (a restored ClusterQueue becomes Active once a Kueue
controller runs in the target and finds everything it names).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.errors import SourceError, UsageError
from drtool.kube.apply import Applier, Existing, Owners
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.crds import wait_established
from drtool.kube.discovery import ResourceType
from drtool.kube.restore import Tally
from drtool.kube.settings import RestoreOptions
from drtool.plugin.contract import RestoreContext, RestoreResult
from drtool.plugin.toolkit.settings import as_bool

from .bundle import Bundle, load
from .cluster import Served, connect, served
from .kinds import COHORTS, CRDS, NAMESPACES, SECRETS, levels
from .quotas import View, cohort_levels
from .refs import MissingRef, missing, object_key, parse_allowed

Obj = dict[str, Any]
LEFT_ALONE = (CRDS, NAMESPACES)  # created when missing, never changed: they belong to the target


@dataclasses.dataclass(frozen=True)
class Options:
    """Restore options: the kubernetes plugin's (``existing``, ``dry_run``, ``workers``, ``crd_timeout``),
    plus ``allow_missing`` (reference kinds that may stay unresolved) and ``install_crds``."""

    base: RestoreOptions
    allow_missing: frozenset[str]
    install_crds: bool

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> Options:
        merged = {**target, **options}
        base = dataclasses.replace(RestoreOptions.parse(target, options), restore_status=False)
        if base.namespace_map:  # namespace_map, or a plan's transforms.namespaces
            raise UsageError(
                "the kueue plugin does not map namespaces",
                "ClusterQueue namespaceSelectors name namespaces by label; restore with the kubernetes plugin",
            )
        return cls(base, parse_allowed(merged.get("allow_missing")), as_bool(merged.get("install_crds"), True))


class _Run:
    """One restore's shared state: the backup in memory, what the target serves and holds, the appliers."""

    def __init__(self, ctx: RestoreContext, client: KubeClient, opts: Options, bundle: Bundle, here: Served) -> None:
        self.ctx, self.client, self.opts, self.bundle, self.here = ctx, client, opts, bundle, here
        self.existing = Existing(client)
        types = list(bundle.types.values())
        uids = {r["uid"] for recs in bundle.records.values() for r in recs if r.get("uid")}
        owners = {o["uid"] for recs in bundle.records.values() for r in recs for o in r.get("owners") or []}
        self.owners = Owners(self.existing, types, uids, owners)
        self.applier = Applier(client, opts.base, self.existing, self.owners)
        keep = dataclasses.replace(opts.base, existing="skip")
        self.keeper = Applier(client, keep, self.existing, self.owners)  # namespaces and CRDs
        self.tally = Tally()
        self.crds_installed: list[str] = []
        self.progress = ctx.progress("objects", bundle.count)


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    opts = Options.parse(target, options)
    started = time.monotonic()
    bundle = load(ctx)
    client = connect(target)
    run = _Run(ctx, client, opts, bundle, served(client))
    check_versions(run)
    refs = check_references(bundle, client, run.here, run.existing)
    blocked = [m for m in refs if m.rule not in opts.allow_missing]
    if opts.base.dry_run:
        _dry_run(run)
        return _result(run, refs, blocked, time.monotonic() - started)
    if blocked:
        raise UsageError(_missing_message(blocked, client.server), _missing_hint(blocked))
    if opts.base.existing == "fail":
        _refuse_conflicts(run)
    _apply_all(run)
    return _result(run, refs, [], time.monotonic() - started)


# --- checks before anything is written ---------------------------------------------------------------


def check_versions(run: _Run) -> None:
    """Each Kueue kind must be writable in the backup's version, or arrive with its CRD in this restore."""
    crds_in_backup = run.bundle.names(CRDS)
    problems = []
    for t in run.bundle.kueue_types():
        if run.here.serves(t):
            continue
        served_versions = run.here.versions(t)
        name = f"{t.resource}.{t.group}"
        if not served_versions and run.opts.install_crds and name in crds_in_backup:
            continue  # installed by this restore
        if served_versions:
            problems.append(f"{name} served as {', '.join(served_versions)}, backup holds {t.version}")
        else:
            problems.append(f"{name} has no CRD")
    if problems:
        raise UsageError(
            f"{run.client.server} cannot take the backup's Kueue objects: {'; '.join(problems[:3])}; "
            "nothing was written",
            "install (or upgrade to) a Kueue serving the backup's API version in the target, or use install_crds=true",
        )


def check_references(
    bundle: Bundle, client: KubeClient, here: Served, existing: Existing, in_backup: bool = True
) -> list[MissingRef]:
    """Every reference of the backup's objects that resolves neither in the backup (unless ``in_backup``
    is false: verify asks about the target alone) nor in the target."""
    target_names: dict[str, set[str]] = {}

    def in_target(key: str, name: str) -> bool:
        if key == SECRETS:
            return _secret_exists(client, here, name)
        if key not in target_names:
            t = bundle.types.get(key) or here.types.get(key)
            known = existing.of(t) if t is not None and here.serves(t) else None
            target_names[key] = set(known or ())
        return name in target_names[key]

    def exists(key: str, name: str) -> bool:
        return (in_backup and name in bundle.names(key)) or in_target(key, name)

    return missing(bundle.objects(), exists, bundle.kueue_namespace)


def _secret_exists(client: KubeClient, here: Served, key: str) -> bool:
    namespace, _, name = key.partition("/")
    try:
        client.get(here.types[SECRETS].path(namespace, name))
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _missing_message(blocked: list[MissingRef], server: str) -> str:
    shown = "; ".join(str(m) for m in blocked[:3])
    more = f" (+{len(blocked) - 3} more)" if len(blocked) > 3 else ""
    return (
        f"{len(blocked)} reference(s) of the Kueue configuration resolve neither in the backup nor in {server}: "
        f"{shown}{more}; nothing was written"
    )


def _missing_hint(blocked: list[MissingRef]) -> str:
    kinds = ",".join(sorted({m.rule for m in blocked}))
    return (
        f"create them in the target first, or restore with allow_missing={kinds}: Kueue accepts such objects "
        f"and keeps them inactive — {blocked[0].effect}"
    )


def _refuse_conflicts(run: _Run) -> None:
    """existing=fail: objects that exist in the target with other content stop the restore before writing."""
    conflicts = [
        f"{k} {object_key(rec['object'])}"
        for k, recs in run.bundle.records.items()
        if k not in LEFT_ALONE
        for rec in recs
        if run.applier.differs(rec, run.bundle.types[k])
    ]
    if conflicts:
        raise UsageError(
            f"{len(conflicts)} Kueue object(s) already exist in {run.client.server} with other content: "
            f"{', '.join(conflicts[:3])}; nothing was written",
            "restore with existing=update (server-side apply) or existing=skip",
        )


# --- writing ----------------------------------------------------------------------------------------------


def batches(bundle: Bundle) -> Iterator[tuple[str, ResourceType, list[Obj]]]:
    """(label, type, records) in restore order: one batch per level and type, one per depth for Cohorts
    (members of a cohort cycle last: Kueue disables them until the cycle is broken, as in the source)."""
    for level in levels(bundle.types):
        for key in level:
            t, recs = bundle.types[key], bundle.records[key]
            if key != COHORTS:
                yield key, t, recs
                continue
            by_name = {r["object"]["metadata"]["name"]: r for r in recs}
            depths, stuck = cohort_levels(View.build({COHORTS: [r["object"] for r in recs]}).parent_of)
            for depth, names in enumerate(depths):
                yield f"{key} depth {depth}", t, [by_name[n] for n in names]
            if stuck:
                yield f"{key} in a cycle", t, [by_name[n] for n in stuck]


def _apply_all(run: _Run) -> None:
    with ThreadPoolExecutor(max_workers=run.opts.base.workers, thread_name_prefix="drtool-kueue") as pool:
        for _label, t, recs in batches(run.bundle):
            if t.key == CRDS:
                _install_crds(run, pool, t, recs)
                continue
            applier = run.keeper if t.key in LEFT_ALONE else run.applier
            list(pool.map(lambda rec, t=t, a=applier: _apply_one(run, a, t, rec), recs))
            if run.tally.failed:  # later levels depend on this one: stop here
                raise SourceError(
                    f"restore into {run.client.server} failed for {len(run.tally.failed)} {t.key} object(s), "
                    f"first: {run.tally.failed[0]}; later kinds were not restored",
                    "objects restored so far stay; fix the cause and run the restore again (it is idempotent)",
                )


def _apply_one(run: _Run, applier: Applier, t: ResourceType, rec: Obj) -> str:
    key = object_key(rec["object"])
    try:
        outcome = applier.apply(rec, t, final=True)
    except ApiError as exc:
        run.tally.fail(t, key, exc)
        outcome = "failed"
    else:
        run.tally.add(t, outcome, key)
    run.progress.advance(1)
    return outcome


def _install_crds(run: _Run, pool: ThreadPoolExecutor, t: ResourceType, recs: list[Obj]) -> None:
    """Create the Kueue CRDs the target lacks (an existing CRD belongs to the target's Kueue: left alone),
    then wait until the kinds they define are served."""
    if not run.opts.install_crds:
        return
    wanted = {f"{k.resource}.{k.group}" for k in run.bundle.kueue_types() if not run.here.serves(k)}
    outcomes = list(pool.map(lambda rec: _apply_one(run, run.keeper, t, rec), recs))
    run.crds_installed = sorted(
        r["object"]["metadata"]["name"] for r, o in zip(recs, outcomes, strict=True) if o == "created"
    )
    pending = [k for k in run.bundle.kueue_types() if f"{k.resource}.{k.group}" in wanted]
    if pending:
        wait_established(run.client, run.opts.base, pending)
    for k in pending:
        run.existing.forget(k)


def _dry_run(run: _Run) -> None:
    """What a restore would do, by the API server's own dry run (``Applier.classify``); writes nothing."""

    def one(t: ResourceType, rec: Obj) -> None:
        key = object_key(rec["object"])
        try:
            outcome = run.applier.classify(rec, t)
        except ApiError as exc:
            run.tally.fail(t, key, exc)
            return
        if t.key in LEFT_ALONE and outcome == "change":
            outcome = "unchanged"  # namespaces and CRDs that exist are left alone
        run.tally.add(t, outcome, key)

    work = [(t, rec) for _label, t, recs in batches(run.bundle) for rec in recs]
    with ThreadPoolExecutor(max_workers=run.opts.base.workers) as pool:
        list(pool.map(lambda item: one(*item), work))


def _result(run: _Run, refs: list[MissingRef], blocked: list[MissingRef], seconds: float) -> RestoreResult:
    t = run.tally
    details: dict[str, Any] = {
        "server": run.client.server,
        "by_type": t.by_type,
        "order": [f"{label}: {len(recs)}" for label, _t, recs in batches(run.bundle)],
        "missing_references": [dataclasses.asdict(m) for m in refs],
        "allowed_missing": sorted(run.opts.allow_missing),
        "crds_installed": run.crds_installed,
        "seconds": round(seconds, 3),
    }
    if run.opts.base.dry_run:
        details |= t.would()
        failing = f"; it would FAIL: {len(blocked)} missing reference(s)" if blocked else ""
        return RestoreResult(changed=False, summary=t.dry_run_summary(run.client.server, failing), details=details)
    details["changed_objects"] = t.names.get("changed", [])
    allowed = f"; {len(refs)} missing reference(s) accepted (allow_missing)" if refs else ""
    summary = (
        f"{t.objects()} Kueue objects into {run.client.server} in {seconds:.1f}s: {t.total('created')} created, "
        f"{t.total('changed')} changed, {t.total('unchanged')} unchanged, "
        f"{t.total('skipped')} left alone (existing){allowed}"
    )
    return RestoreResult(changed=t.changed(), summary=summary, details=details)
