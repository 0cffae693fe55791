"""The DNS cut-over list: every DNS record that points at the old cluster's load balancers.

Load balancer addresses come from ``status.loadBalancer.ingress`` of LoadBalancer Services and Ingresses
(IPs and hostnames). A record points at one when it is an A/AAAA record holding such an IP, or a CNAME
(or ALIAS-like target of a DNSEndpoint) naming such a hostname. After a restore the new cluster's load
balancers have new addresses (unless reserved), so each of these records must be re-pointed: the list
is what the operator (or ExternalDNS, once it runs in the new cluster) has to change.

The restore option ``cutover`` (``old=new[,old2=new2]``: an old load balancer IP or hostname and its
replacement) does that change for the zones it restores: every A/AAAA record holding an old IP and every
CNAME naming an old hostname is written pointing at the new one, and verify expects exactly that. The
independence analysis then shows those records as remediated by the step. DNSEndpoints are left as they
are: ExternalDNS derives them again from the restored Services and Ingresses.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import dns.rdatatype
import dns.rrset

from drtool.errors import UsageError

if TYPE_CHECKING:
    from .zones import RRsets

Obj = dict[str, Any]
POINTING_TYPES = ("A", "AAAA", "CNAME")


@dataclasses.dataclass(frozen=True)
class Balancer:
    address: str  # IP or hostname (no trailing dot)
    owner: str  # "Service ns/name" or "Ingress ns/name"


@dataclasses.dataclass(frozen=True)
class CutOver:
    record: str  # "name TYPE value"
    source: str  # "zone ml.example.com." or "DNSEndpoint ns/name"
    address: str
    owner: str


def balancers(services: Iterable[Obj], ingresses: Iterable[Obj]) -> list[Balancer]:
    out: dict[str, Balancer] = {}
    for kind, objs in (("Service", services), ("Ingress", ingresses)):
        for obj in objs:
            if kind == "Service" and (obj.get("spec") or {}).get("type") != "LoadBalancer":
                continue
            meta = obj["metadata"]
            owner = f"{kind} {meta['namespace']}/{meta['name']}"
            for ing in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
                for value in (ing.get("ip"), ing.get("hostname")):
                    if value:
                        out.setdefault(_norm(value), Balancer(_norm(value), owner))
    return sorted(out.values(), key=lambda b: b.address)


def _norm(value: str) -> str:
    return value.rstrip(".").lower()


def in_rrset(rrset: dns.rrset.RRset, zone: str, index: dict[str, Balancer]) -> Iterator[CutOver]:
    rdtype = dns.rdatatype.to_text(rrset.rdtype)
    if rdtype not in POINTING_TYPES:
        return
    for rdata in rrset:
        value = _norm(rdata.to_text())
        if value in index:
            b = index[value]
            yield CutOver(f"{rrset.name} {rdtype} {rdata.to_text()}", f"zone {zone}", b.address, b.owner)


def in_endpoint(obj: Obj, index: dict[str, Balancer]) -> Iterator[CutOver]:
    meta = obj["metadata"]
    source = f"DNSEndpoint {meta.get('namespace')}/{meta['name']}"
    for ep in (obj.get("spec") or {}).get("endpoints") or []:
        for target in ep.get("targets") or []:
            value = _norm(str(target))
            if value in index:
                b = index[value]
                record = f"{_norm(ep.get('dnsName', ''))}. {ep.get('recordType', 'A')} {target}"
                yield CutOver(record, source, b.address, b.owner)


def parse_cutover(value: Any) -> dict[str, str]:
    """The ``cutover`` option: ``old=new`` pairs (a string, a list of them or a mapping), names normalised."""
    if isinstance(value, Mapping):
        items = [f"{k}={v}" for k, v in value.items()]
    else:
        items = value if isinstance(value, list | tuple) else [p for p in str(value or "").split(",") if p.strip()]
    out = {}
    for item in items:
        old, sep, new = str(item).partition("=")
        if not sep or not old.strip() or not new.strip():
            raise UsageError(f"bad cutover entry {item!r}", "use old-address=new-address[,old2=new2]")
        out[_norm(old.strip())] = _norm(new.strip())
    return out


def repoint(rrsets: RRsets, cutover: Mapping[str, str]) -> RRsets:
    """The zone with every A/AAAA/CNAME record that names an old address in ``cutover`` pointing at the new."""
    if not cutover:
        return rrsets
    out: RRsets = {}
    for (name, rdtype), (ttl, rdatas) in rrsets.items():
        if rdtype in POINTING_TYPES:
            rdatas = tuple(sorted({_new_rdata(name, rdtype, r, cutover) for r in rdatas}))
        out[(name, rdtype)] = (ttl, rdatas)
    return out


def _new_rdata(name: str, rdtype: str, rdata: str, cutover: Mapping[str, str]) -> str:
    new = cutover.get(_norm(rdata))
    if new is None:
        return rdata
    if rdtype == "CNAME":
        return f"{new}."
    try:
        family = ipaddress.ip_address(new).version
    except ValueError:
        family = None
    if family != (4 if rdtype == "A" else 6):
        version = 4 if rdtype == "A" else 6
        raise UsageError(
            f"cutover maps {rdata} of the {rdtype} record {name} to {new}, which is not an IPv{version} address",
            "map an address record's IP to an IP; a hostname replaces a CNAME's target",
        )
    return new
