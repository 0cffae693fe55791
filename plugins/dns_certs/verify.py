"""Did it come back, and will it stay? The target read back through its own APIs and compared.

- Kubernetes objects: the toolkit's per-type comparison (counts, content hashes, diffs;
  Certificates with their status), kube-dns's ClusterIP, ExternalDNS's arguments (held or not).
- cert-manager would issue nothing: no CertificateRequest exists for a restored Certificate, and for each
  Certificate cert-manager's trigger conditions hold (``certs.reissue_reasons``).
- Zones: AXFR from ``dns_server`` (or the zone file written into ``zone_dir``), SOA serial and every RRset
  equal to the backup's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from drtool.errors import DrtoolError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import ResourceType
from drtool.kube.objects import object_key
from drtool.kube.settings import Connection, RestoreOptions
from drtool.kube.verify import check_type, settle_deadline
from drtool.plugin.contract import Check, RestoreContext

from . import certs, externaldns, tsig, zones
from .kinds import CERTIFICATE_REQUESTS, CERTIFICATES, COREDNS_NAMESPACE, DEPLOYMENTS, KUBE_DNS, OWN_APPLY, SERVICES
from .restore import load_zones
from .settings import RestoreSettings
from .view import KubeView, only

Obj = dict[str, Any]
MAX_LISTED = 5


def _guard(name: str, fn: Callable[[], Check | list[Check]]) -> list[Check]:
    try:
        out = fn()
    except DrtoolError as exc:
        return [Check(f"dns-certs: {name}", False, exc.one_line())]
    return out if isinstance(out, list) else [out]


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    s = RestoreSettings.parse(target, options)
    if s.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    if s.externaldns == "release":
        return _guard("ExternalDNS released", lambda: _released(target))
    checks: list[Check] = []
    view, own = KubeView(ctx, without=OWN_APPLY), only(ctx, OWN_APPLY)
    if s.kubernetes and (view.artifacts or own.artifacts):
        checks += _guard("target reachable", lambda: _kube_checks(ctx, view, own, target, options, s))
    checks += _guard("zones", lambda: _zone_checks(ctx, s))
    return checks


def _kube_checks(
    ctx: RestoreContext,
    view: KubeView,
    own: KubeView,
    target: Mapping[str, Any],
    options: Mapping[str, Any],
    s: RestoreSettings,
) -> list[Check]:
    opts = RestoreOptions.parse(target, options)
    client = KubeClient(Connection.from_mapping(target))
    until = settle_deadline(opts.settle)
    checks = [
        _renamed(check_type(view, client, t, opts.transforms, opts.restore_status, settle_until=until))  # type: ignore[arg-type]
        for t in view.types().values()
    ]
    checks += [_own_check(client, t, rec, s) for t in own.types().values() for rec in own.records(t.key)]
    certificates = view.records(CERTIFICATES)
    if certificates:
        checks.append(_no_requests(client, view, certificates, ctx.created))
        checks.append(_would_not_reissue(client, view, certificates))
    return checks


def _renamed(check: Check) -> Check:
    return Check(check.name.replace("kubernetes:", "dns-certs:", 1), check.ok, check.detail)


def _own_check(client: KubeClient, t: ResourceType, rec: Obj, s: RestoreSettings) -> Check:
    obj = rec["object"]
    ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
    try:
        live = client.get(t.path(ns, name))
    except ApiError as exc:
        return Check(f"dns-certs: {t.key} {ns}/{name}", False, exc.message)
    if t.key == SERVICES and (ns, name) == (COREDNS_NAMESPACE, KUBE_DNS):
        want, have = obj["spec"].get("clusterIP"), live["spec"].get("clusterIP")
        return Check(f"dns-certs: kube-dns ClusterIP {want}", want == have, f"target has {have}")
    if t.key == DEPLOYMENTS:
        expected = externaldns.hold(obj) if s.externaldns == "hold" else obj
        want, have = externaldns.settings(expected), externaldns.settings(live)
        ok = want == have
        detail = f"owner id {have.get('txt_owner_id')!r}, policy {have.get('policy')}" + (
            "" if ok else f"; want {want}"
        )
        return Check(f"dns-certs: ExternalDNS {ns}/{name}", ok, detail)
    return Check(f"dns-certs: {t.key} {ns}/{name}", True, "present")


def _when(stamp: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _no_requests(client: KubeClient, view: KubeView, certificates: list[Obj], backed_up: str) -> Check:
    """No CertificateRequest for a restored Certificate: cert-manager started no issuance (or the restore
    brought none: they are never backed up). One created before the backup is the cluster's history, not
    this restore's doing: a restore in place (a drill) finds cert-manager's kept requests."""
    restored = {object_key(r["object"]) for r in certificates}
    path = "/apis/cert-manager.io/v1/certificaterequests"
    try:
        items = [i for page in client.list_pages(path) for i in page.get("items") or []]
    except ApiError as exc:
        if exc.status != 404:
            raise
        items = []
    ours = [
        i
        for i in items
        if f"{i['metadata']['namespace']}/{(i['metadata'].get('annotations') or {}).get(certs.CERT_NAME)}" in restored
        or any(o.get("kind") == "Certificate" and f"{i['metadata']['namespace']}/{o.get('name')}" in restored
               for o in i["metadata"].get("ownerReferences") or [])
    ]  # fmt: skip
    since = _when(backed_up).replace(microsecond=0)  # creationTimestamp has whole seconds: err on counting
    mine = [object_key(i) for i in ours if _when(i["metadata"]["creationTimestamp"]) >= since]
    older = len(ours) - len(mine)
    detail = f"{len(mine)} for {len(restored)} restored Certificates" + (
        f": {', '.join(mine[:MAX_LISTED])}" if mine else ""
    )
    if older:
        detail += f" ({older} made before the backup: the cluster's history)"
    return Check(f"dns-certs: no {CERTIFICATE_REQUESTS}", not mine, detail)


def _would_not_reissue(client: KubeClient, view: KubeView, certificates: list[Obj]) -> Check:
    """cert-manager's trigger conditions on the live Certificates and their live Secrets."""
    now = dt.datetime.now(dt.UTC)
    already = set((view.plugin_meta or {}).get("certificates_without_secret") or [])
    problems = []
    for rec in certificates:
        ns, name = rec["object"]["metadata"]["namespace"], rec["object"]["metadata"]["name"]
        if f"{ns}/{name}" in already:
            continue
        live = client.get(f"/apis/cert-manager.io/v1/namespaces/{ns}/certificates/{name}")
        secret_name = (live.get("spec") or {}).get("secretName", "")
        try:
            secret = client.get(f"/api/v1/namespaces/{ns}/secrets/{secret_name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            secret = None
        problems += [f"{ns}/{name}: {r}" for r in certs.reissue_reasons(live, secret, now)]
    checked = len(certificates) - len(already)
    detail = "\n".join(problems[:MAX_LISTED]) or (
        f"{checked} Certificates: Secrets match spec, issuer annotations set, renewal not due"
    )
    if already:
        detail += (
            f"; {len(already)} had no Secret in the source either (issued anyway): {', '.join(sorted(already)[:3])}"
        )
    return Check("dns-certs: cert-manager would not re-issue", not problems, detail)


def _zone_checks(ctx: RestoreContext, s: RestoreSettings) -> list[Check]:
    checks = []
    key = tsig.load(s.dns.key_file) if s.dns else None
    for zone, backup in load_zones(ctx, s.cutover).items():
        if s.dns is not None:
            live = zones.read(s.dns, zone, key)
            checks.append(_compare(f"zone {zone} at {s.dns.address}", zone, backup, live, s.serial == "raise"))
        if s.zone_dir:
            path = Path(s.zone_dir).expanduser() / f"{zone.rstrip('.')}.zone"
            if not path.exists():
                checks.append(Check(f"dns-certs: zone file {path}", False, "missing"))
            else:
                checks.append(_compare(f"zone file {path}", zone, backup, zones.parse(path.read_bytes(), zone)))
    return checks


def _compare(what: str, zone: str, backup: zones.RRsets, live: zones.RRsets, raised: bool = False) -> Check:
    """Every RRset equal, the SOA serial too; with ``raised`` (``serial=raise``) a serial ahead of the backup's."""
    want = zones.serial_of(backup, zone)
    have = zones.serial_of(live, zone) if (zone, "SOA") in live else None
    ahead = raised and have is not None and 0 < (have - want) % 2**32 < 2**31
    if ahead:
        backup, live = zones.without_serial(backup, zone), zones.without_serial(live, zone)
    diff = zones.differences(backup, live)
    detail = f"serial {have} (backup {want}); {len(backup)} RRsets in backup, {len(live)} in target"
    if diff:
        detail += (
            "\n"
            + "\n".join(diff[:MAX_LISTED])
            + (f"\n(+{len(diff) - MAX_LISTED} more)" if len(diff) > MAX_LISTED else "")
        )
    return Check(f"dns-certs: {what}", not diff and (have == want or ahead), detail)


def _released(target: Mapping[str, Any]) -> Check:
    pending = externaldns.held(KubeClient(Connection.from_mapping(target)))
    detail = f"still held: {', '.join(pending)}" if pending else "no ExternalDNS Deployment is held at upsert-only"
    return Check("dns-certs: ExternalDNS released", not pending, detail)
