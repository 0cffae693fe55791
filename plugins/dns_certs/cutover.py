"""The DNS cut-over list: every DNS record that points at the old cluster's load balancers.

Load balancer addresses come from ``status.loadBalancer.ingress`` of LoadBalancer Services and Ingresses
(IPs and hostnames). A record points at one when it is an A/AAAA record holding such an IP, or a CNAME
(or ALIAS-like target of a DNSEndpoint) naming such a hostname. After a restore the new cluster's load
balancers have new addresses (unless reserved), so each of these records must be re-pointed: the list
is what the operator (or ExternalDNS, once it runs in the new cluster) has to change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import dns.rdatatype
import dns.rrset

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
