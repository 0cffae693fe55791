"""Back up what a restored platform needs to keep its names and certificates, and what still points back.

Kubernetes objects go through the toolkit's ``backup_type`` (paged LIST, cleaned objects, one
NDJSON artifact per type, Secrets sensitive), each type filtered to what this plugin owns: cert-manager
Issuers, ClusterIssuers, Certificates and exactly the Secrets they name; ExternalDNS DNSEndpoints and
Deployments; CoreDNS's Corefile ConfigMaps and the kube-dns Service; the namespaces and CRDs those need.
So a dns-certs backup restores with the toolkit's Kubernetes machinery, and a full kubernetes backup of the
same cluster holds the same bytes (deduplicated by the store).

Zones are transferred by AXFR and streamed into ``zones/<zone>zone`` as master-file lines. Along the way
the plugin records, in its manifest meta (``drtool show --json``): each certificate's expiry, ExternalDNS's
owner id and policy, the kube-dns ClusterIP, the load balancer addresses, and the DNS cut-over list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from drtool.errors import SourceError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import ResourceType, crd_index, discover
from drtool.kube.listing import BackupRun, TypeResult, backup_type
from drtool.kube.objects import object_key
from drtool.kube.settings import BackupOptions, Connection, Filters
from drtool.plugin.contract import BackupContext, Inventory

from . import certs, cutover, externaldns, tsig, zones
from .kinds import (
    CERT_MANAGER,
    CERTIFICATES,
    CONFIGMAPS,
    COREDNS_CONFIGMAPS,
    COREDNS_NAMESPACE,
    CRDS,
    DEPLOYMENTS,
    DNS_ENDPOINTS,
    INGRESSES,
    KUBE_DNS,
    NAMESPACES,
    NOT_BACKED_UP,
    SECRETS,
    SERVICES,
    is_external_dns,
    secret_refs,
)
from .settings import SourceSettings

Obj = dict[str, Any]
ZONE_FORMAT = "dns-zone-v1"
WRITE_SIZE = 1 << 16


def zone_artifact(zone: str) -> str:
    return f"zones/{zone}zone"


@dataclasses.dataclass
class _Kube:
    """Objects seen while listing (cert-manager objects, DNSEndpoints, Deployments; metadata of the rest)."""

    objects: dict[str, list[Obj]] = dataclasses.field(default_factory=dict)
    namespaces: set[str] = dataclasses.field(default_factory=set)
    load_balancers: list[Obj] = dataclasses.field(default_factory=list)
    cert_facts: list[certs.CertFacts] = dataclasses.field(default_factory=list)
    kube_dns_ip: str | None = None
    secrets: set[str] = dataclasses.field(default_factory=set)  # ns/name of the Secrets kept

    def keep(
        self, key: str, wanted: Callable[[Obj], bool] = lambda _o: True, hold: bool = True
    ) -> Callable[[Obj], bool]:
        """A ``backup_type`` filter: keeps what ``wanted`` accepts, notes its namespace, holds it if ``hold``."""
        bucket = self.objects.setdefault(key, [])

        def hook(obj: Obj) -> bool:
            if not wanted(obj):
                return False
            if hold:
                bucket.append(obj)
            if obj["metadata"].get("namespace"):
                self.namespaces.add(obj["metadata"]["namespace"])
            return True

        return hook


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    settings = SourceSettings.from_mapping(source)
    meta: dict[str, Any] = {}
    balancers: list[cutover.Balancer] = []
    seen = _Kube()
    if settings.kubernetes:
        meta, balancers, seen = _kube_backup(source, settings, ctx)
    index = {b.address: b for b in balancers}
    cut = [c for obj in seen.objects.get(DNS_ENDPOINTS, []) for c in cutover.in_endpoint(obj, index)]
    zone_meta = {}
    key = tsig.load(settings.dns.key_file) if settings.dns else None
    for zone in settings.zones:
        assert settings.dns is not None
        rrsets: zones.RRsets = {}
        art_meta = {"format": ZONE_FORMAT, "zone": zone, "server": settings.dns.address}
        with ctx.artifact(zone_artifact(zone), meta=art_meta) as sink:
            pending = bytearray()
            for rrset in zones.transfer(settings.dns, zone, key):
                pending += zones.master_lines(rrset)
                if len(pending) >= WRITE_SIZE:  # hand the store whole blocks, not one line per call
                    sink.write(pending)
                    pending = bytearray()
                zones.add(rrsets, rrset)
                cut += cutover.in_rrset(rrset, zone, index)
            sink.write(pending)
        s = zones.summary(zone, rrsets)
        zone_meta[zone] = {"serial": s.serial, "rrsets": s.rrsets, "records": s.records}
    meta |= {
        "dns_server": settings.dns.address if settings.dns else None,
        "zones": zone_meta,
        "cutover": [dataclasses.asdict(c) for c in cut],
    }
    return meta


def _kube_backup(
    source: Mapping[str, Any], settings: SourceSettings, ctx: BackupContext
) -> tuple[dict[str, Any], list[cutover.Balancer], _Kube]:
    client = KubeClient(Connection.from_mapping(source))
    crds = crd_index(client, settings.page_size)
    types = {t.key: t for t in discover(client, crds)[0]}
    run = BackupRun(client, ctx, Filters(), BackupOptions(page_size=settings.page_size, workers=1))
    seen = _Kube()
    results: list[TypeResult] = []

    def one(key: str, hook: Callable[[Obj], bool]) -> None:
        if key in types:
            results.append(backup_type(run, types[key], None, keep=hook))

    for key in (*CERT_MANAGER, DNS_ENDPOINTS):
        one(key, seen.keep(key))
    wanted = {
        f"{ns}/{name}"
        for key in CERT_MANAGER
        for obj in seen.objects.get(key, [])
        for ns, name in secret_refs(obj, settings.cluster_resource_namespace)
    }
    by_secret = {
        f"{c['metadata']['namespace']}/{c['spec'].get('secretName')}": object_key(c)
        for c in seen.objects.get(CERTIFICATES, [])
    }
    one(SECRETS, seen.keep(SECRETS, _secret_hook(wanted, by_secret, seen), hold=False))
    coredns = {f"{COREDNS_NAMESPACE}/{n}" for n in COREDNS_CONFIGMAPS}
    one(CONFIGMAPS, seen.keep(CONFIGMAPS, lambda o: object_key(o) in coredns, hold=False))
    one(SERVICES, seen.keep(SERVICES, _service_hook(seen), hold=False))
    one(DEPLOYMENTS, seen.keep(DEPLOYMENTS, is_external_dns))
    ingresses = _list(client, types.get(INGRESSES))
    one(NAMESPACES, lambda o: o["metadata"]["name"] in seen.namespaces)
    used_crds = {f"{r.type.resource}.{r.type.group}" for r in results if r.type.crd and r.count}
    one(CRDS, lambda o: o["metadata"]["name"] in used_crds)
    balancers = cutover.balancers(seen.load_balancers, ingresses)
    meta = {
        "server": client.server,
        "objects": {r.type.key: r.count for r in results},
        "not_served": [k for k in (*CERT_MANAGER, DNS_ENDPOINTS) if k not in types],
        "not_backed_up": {k: why for k, why in NOT_BACKED_UP.items() if k in types},
        "certificates": [dataclasses.asdict(f) for f in sorted(seen.cert_facts, key=lambda f: f.not_after)],
        # cert-manager issues these anyway (their Secret is missing in the source too): not the restore's doing
        "certificates_without_secret": sorted(cert for key, cert in by_secret.items() if key not in seen.secrets),
        "externaldns": [externaldns.settings(d) for d in seen.objects.get(DEPLOYMENTS, [])],
        "kube_dns_ip": seen.kube_dns_ip,
        "load_balancers": [dataclasses.asdict(b) for b in balancers],
        "failure_domain": {
            "loadbalancer_addresses": sorted({b.address for b in balancers if b.owner.startswith("Service")}),
            "ingress_addresses": sorted({b.address for b in balancers if b.owner.startswith("Ingress")}),
        },
    }
    return meta, balancers, seen


def _secret_hook(wanted: set[str], by_secret: dict[str, str], seen: _Kube) -> Callable[[Obj], bool]:
    """Keep the named Secrets; note the x509 facts of TLS ones (public data only, the key is not kept)."""

    def hook(obj: Obj) -> bool:
        key = object_key(obj)
        if key not in wanted:
            return False
        seen.secrets.add(key)
        found = certs.facts(by_secret.get(key, ""), obj)
        if found is not None:
            seen.cert_facts.append(found)
        return True

    return hook


def _service_hook(seen: _Kube) -> Callable[[Obj], bool]:
    """Keep kube-dns (its ClusterIP is what every pod's resolv.conf names); note LoadBalancer Services."""

    def hook(obj: Obj) -> bool:
        if (obj.get("spec") or {}).get("type") == "LoadBalancer":
            seen.load_balancers.append(obj)
        if object_key(obj) != f"{COREDNS_NAMESPACE}/{KUBE_DNS}":
            return False
        seen.kube_dns_ip = obj["spec"].get("clusterIP")
        return True

    return hook


def _list(client: KubeClient, t: ResourceType | None) -> list[Obj]:
    if t is None:
        return []
    try:
        return [item for page in client.list_pages(t.path()) for item in page.get("items") or []]
    except ApiError as exc:
        raise SourceError(f"listing {t.key}: {exc.message}", exc.hint) from None


def discover_inventory(source: Mapping[str, Any]) -> Inventory:
    """Counts of cert-manager objects and DNSEndpoints (one ``limit=1`` LIST each) and the zones' SOA serials."""
    settings = SourceSettings.from_mapping(source)
    counts: dict[str, int] = {}
    details: dict[str, Any] = {}
    if settings.kubernetes:
        client = KubeClient(Connection.from_mapping(source))
        types = {t.key: t for t in discover(client, crd_index(client))[0]}
        for key in (*CERT_MANAGER, DNS_ENDPOINTS):
            if key in types:
                page = client.get(types[key].path(), {"limit": 1})
                more = int((page.get("metadata") or {}).get("remainingItemCount") or 0)
                counts[key] = len(page.get("items") or []) + more
        details["server"] = client.server
    if settings.zones:
        assert settings.dns is not None
        key = tsig.load(settings.dns.key_file)
        counts["zones"] = len(settings.zones)
        details["zones"] = {z: zones.summary(z, zones.read(settings.dns, z, key)).serial for z in settings.zones}
    return Inventory(counts=counts, details=details)
