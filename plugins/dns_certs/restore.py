"""Restore: zones planned first (nothing is written if one cannot be restored), then the Kubernetes
objects, then the zones.

1. Every zone artifact is read to its end (the store verifies it) and parsed; with ``dns_server`` the
   target zone is transferred and the update planned, which refuses before any write when the target's
   serial is ahead of the backup's.
2. Kubernetes objects through the toolkit's object restore (CRDs, namespaces, Secrets, ConfigMaps,
   then the rest: Secrets before Certificates, so cert-manager finds each Certificate's key pair and
   status and issues nothing). Certificates get their backed-up status through /status.
3. kube-dns and ExternalDNS are applied here: kube-dns keeps its ClusterIP (every pod's resolv.conf and
   the kubelets' clusterDNS name it), and ExternalDNS is held at ``upsert-only`` with ``externaldns=hold``.
4. Zones: written as zone files into ``zone_dir`` and/or by RFC 2136 updates (TSIG) to ``dns_server``.
``externaldns=release`` does only one thing: put held ExternalDNS Deployments back to their policy.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError, UsageError
from drtool.kube.apply import Applier, Existing, Owners
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import ResourceType
from drtool.kube.objects import object_key
from drtool.kube.restore import restore_objects
from drtool.kube.settings import Connection, RestoreOptions
from drtool.plugin.contract import RestoreContext, RestoreResult

from . import certs, cutover, externaldns, tsig, zones
from .backup import ZONE_FORMAT
from .kinds import COREDNS_NAMESPACE, DEPLOYMENTS, KUBE_DNS, OWN_APPLY, SERVICES
from .settings import RestoreSettings
from .view import KubeView, only

Obj = dict[str, Any]


def load_zones(ctx: RestoreContext, repoint: Mapping[str, str]) -> dict[str, zones.RRsets]:
    """Every zone of the backup, each artifact read to its end (verified) before anything is written, with
    the ``cutover`` option's records re-pointed (``cutover.repoint``)."""
    out = {}
    for art in ctx.artifacts:
        if art.meta.get("format") == ZONE_FORMAT:
            zones.file_name(art.meta["zone"])  # a name that cannot be a zone file is refused before any write
            with ctx.open(art.name) as src:
                out[art.meta["zone"]] = cutover.repoint(zones.parse(src.read(), art.meta["zone"]), repoint)
    return out


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    s = RestoreSettings.parse(target, options)
    if s.externaldns == "release":
        return _release(target, s)
    started = time.monotonic()
    backup_zones = load_zones(ctx, s.cutover)
    key = tsig.load(s.dns.key_file) if s.dns else None
    plans = _plan_zones(s, backup_zones, key)
    details: dict[str, Any] = {}
    changed = False
    view = KubeView(ctx, without=OWN_APPLY)
    own = only(ctx, OWN_APPLY)
    if s.kubernetes and (view.artifacts or own.artifacts):
        client = KubeClient(Connection.from_mapping(target))
        own_records = {t.key: (t, own.records(t.key)) for t in own.types().values()}
        _refuse_kube_dns_conflict(client, own_records)
        kube = restore_objects(view, target, options) if view.artifacts else None  # type: ignore[arg-type]
        applied = _apply_own(client, RestoreOptions.parse(target, options), own_records, s)
        changed = bool(kube and kube.changed) or any(v in ("created", "changed") for v in applied.values())
        details["kubernetes"] = dict(kube.details) if kube else {}
        details["kubernetes_summary"] = kube.summary if kube else "no Kubernetes objects"
        details["applied"] = applied
    zone_results = _restore_zones(s, backup_zones, plans, key)
    changed = changed or any(r.get("changed") for r in zone_results.values())
    details["zones"] = zone_results
    details |= _facts(ctx, s)
    details["seconds"] = round(time.monotonic() - started, 3)
    return RestoreResult(changed=changed and not s.dry_run, summary=_summary(details, s), details=details)


def _plan_zones(
    s: RestoreSettings, backup_zones: dict[str, zones.RRsets], key: tsig.Tsig | None
) -> dict[str, zones.UpdatePlan]:
    """Every zone's update, planned against the target's current content before anything is written."""
    if s.dns is None:
        return {}
    return {
        zone: zones.plan_update(zone, rrsets, zones.read(s.dns, zone, key), raise_serial=s.serial == "raise")
        for zone, rrsets in backup_zones.items()
    }


def _restore_zones(
    s: RestoreSettings,
    backup_zones: dict[str, zones.RRsets],
    plans: dict[str, zones.UpdatePlan],
    key: tsig.Tsig | None,
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for zone, rrsets in backup_zones.items():
        r: dict[str, Any] = {"serial": zones.serial_of(rrsets, zone), "rrsets": len(rrsets)}
        if s.zone_dir and not s.dry_run:
            path, wrote = zones.write_file(s.zone_dir, zone, rrsets)
            r |= {"file": str(path), "changed": wrote}
        elif s.zone_dir:
            r["file"] = f"would write {s.zone_dir}/{zones.file_name(zone)}"
        if zone in plans:
            plan = plans[zone]
            r |= {"server": s.dns.address if s.dns else None, "replace": len(plan.replace), "delete": len(plan.delete)}
            r["messages"] = plan.messages
            if not plan.empty and not s.dry_run:
                assert s.dns is not None
                zones.apply_update(s.dns, zone, key, plan)
            r["changed"] = bool(r.get("changed")) or (not plan.empty and not s.dry_run)
        out[zone] = r
    return out


def _refuse_kube_dns_conflict(client: KubeClient, own: dict[str, tuple[ResourceType, list[Obj]]]) -> None:
    """A kube-dns that exists with another ClusterIP cannot take the backup's (the field is immutable):
    stop before writing anything rather than leave pods' resolv.conf pointing at nothing."""
    t, recs = own.get(SERVICES, (None, []))
    for rec in recs:
        want = rec["object"]["spec"].get("clusterIP")
        if t is None or object_key(rec["object"]) != f"{COREDNS_NAMESPACE}/{KUBE_DNS}" or not want:
            continue
        try:
            live = client.get(t.path(COREDNS_NAMESPACE, KUBE_DNS))
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        have = live["spec"].get("clusterIP")
        if have != want:
            raise UsageError(
                f"Service {COREDNS_NAMESPACE}/{KUBE_DNS} exists in {client.server} with ClusterIP {have}, the backup's "
                f"is {want} (immutable); nothing was written",
                "delete that Service first (kubelets' clusterDNS must name the backup's IP), or restore with "
                "kubernetes=false",
            )


def _apply_own(
    client: KubeClient,
    opts: RestoreOptions,
    own: dict[str, tuple[ResourceType, list[Obj]]],
    s: RestoreSettings,
) -> dict[str, str]:
    """kube-dns with its ClusterIP, ExternalDNS (held when asked): server-side apply, outcome per object."""
    existing = Existing(client)
    applier = Applier(client, opts, existing, Owners(existing, [t for t, _ in own.values()], set(), set()))
    outcomes: dict[str, str] = {}
    for t, recs in own.values():
        for rec in recs:
            body = rec["object"]
            if t.key == DEPLOYMENTS and s.externaldns == "hold":
                body = externaldns.hold(body)
            name = f"{t.key} {object_key(body)}"
            try:
                outcomes[name] = _ssa(client, applier, t, body, opts.dry_run)
            except ApiError as exc:
                raise SourceError(f"applying {name}: {exc.message}", exc.hint) from None
    return outcomes


def _ssa(client: KubeClient, applier: Applier, t: ResourceType, body: Obj, dry_run: bool) -> str:
    meta = body["metadata"]
    try:
        before = client.get(t.path(meta.get("namespace"), meta["name"]))["metadata"]["resourceVersion"]
    except ApiError as exc:
        if exc.status != 404:
            raise
        before = None
    try:
        after = applier.ssa(t, body, dry_run=dry_run)["metadata"].get("resourceVersion")
    except ApiError as exc:
        if dry_run and exc.status == 404:  # its namespace is created by this restore, which a dry run skips
            return "would create"
        raise
    if before is None:
        return "would create" if dry_run else "created"
    return "unchanged" if after == before else ("would change" if dry_run else "changed")


def _release(target: Mapping[str, Any], s: RestoreSettings) -> RestoreResult:
    client = KubeClient(Connection.from_mapping(target))
    if s.dry_run:
        pending = externaldns.held(client)
        return RestoreResult(
            False, f"dry run: would release {len(pending)} ExternalDNS Deployment(s)", {"held": pending}
        )
    released = externaldns.release(client)
    summary = (
        f"released {len(released)} ExternalDNS Deployment(s) to their backed-up policy"
        if released
        else ("no ExternalDNS Deployment was held: nothing to release")
    )
    return RestoreResult(bool(released), summary, {"released": released})


def _facts(ctx: RestoreContext, s: RestoreSettings) -> dict[str, Any]:
    """What the backup recorded, for the operator: certificate expiry against RTO + margin, the cut-over list."""
    meta = ctx.plugin_meta or {}
    facts = [certs.CertFacts(**{**f, "dns_names": tuple(f["dns_names"])}) for f in meta.get("certificates") or []]
    horizon = s.rto + s.expiry_margin
    report = certs.expiry_report(facts, dt.datetime.now(dt.UTC), horizon)
    return {
        "certificates": [dataclasses.asdict(e) for e in report],
        "expiry_horizon": str(horizon),
        "expiring": [e.certificate or e.secret for e in report if e.warn],
        "externaldns": {"mode": s.externaldns, "deployments": meta.get("externaldns") or []},
        "kube_dns_ip": meta.get("kube_dns_ip"),
        "cutover": meta.get("cutover") or [],
    }


def _summary(details: dict[str, Any], s: RestoreSettings) -> str:
    parts = [details.get("kubernetes_summary", "Kubernetes objects not restored (kubernetes=false)")]
    zone_parts = []
    for zone, r in details["zones"].items():
        how = [w for w, on in (("file", "file" in r), ("RFC 2136", "server" in r)) if on]
        zone_parts.append(
            f"{zone} serial {r['serial']} ({' + '.join(how) or 'not restored: no zone_dir or dns_server'})"
        )
    if zone_parts:
        parts.append("zones: " + ", ".join(zone_parts))
    if details["expiring"]:
        parts.append(
            f"WARNING {len(details['expiring'])} certificate(s) expire within RTO + margin "
            f"({details['expiry_horizon']}): " + ", ".join(details["expiring"][:5])
        )
    if details["cutover"]:
        parts.append(f"{len(details['cutover'])} DNS record(s) point at the old load balancers (details.cutover)")
    if s.externaldns == "hold":
        parts.append("ExternalDNS held at upsert-only: release with externaldns=release once the rest is restored")
    return "; ".join(parts)
