"""The failure domain of a backed-up system, and which part of it an address falls in.

The plugins record at backup time what dies with the source (``Manifest.failure_domain``: lists under keys
such as ``kubernetes_api_endpoints``, ``node_addresses``, ``service_cidrs``, ``cluster_dns_suffixes``,
``ingress_hosts``, ``etcd_endpoints``). This module turns those lists into something an address can be held
against, for the static analysis (analysis.py) and for the rehearsal's network guard, which must decide on
every ``connect()`` without resolving names. The key decides how a list is read:

- ``*_cidrs``: networks (``10.96.0.0/16``): any IP in them is inside;
- ``*_dns_suffixes``: the cluster's DNS domain (``cluster.local``): names under it are inside, and so are the
  cluster's short Service names (``vault.vault.svc``);
- anything else: hosts, IPs, ``host:port`` or URLs (``https://10.0.0.5:6443``), hostnames with a leading
  ``*.`` as Ingress wildcards.

Loopback addresses are special: a lab (and a ``kubectl port-forward`` tunnel) puts source and target on the
same host, so a loopback entry identifies a service only together with its port, never the whole host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from drtool.repo.manifest import Manifest

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443, "git": 9418, "ssh": 22, "oci": 443}
SERVICE_LABEL = "svc"  # <service>.<namespace>.svc: the cluster's short Service names


@dataclasses.dataclass(frozen=True)
class Address:
    """A host (lower case, IP normalised) and, when the text named one, a port."""

    host: str
    port: int | None = None

    @property
    def ip(self) -> IP | None:
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    @property
    def loopback(self) -> bool:
        ip = self.ip
        return self.host == "localhost" or (ip is not None and ip.is_loopback)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.port is not None else host


def parse_address(text: str) -> Address | None:
    """A URL, ``host:port``, ``[v6]:port``, a bare IP or hostname; ``None`` when it names no network host."""
    text = text.strip()
    if not text or " " in text:
        return None
    with contextlib.suppress(ValueError):  # a bare IPv6 address would otherwise read as host:port
        return Address(normal_ip(text.strip("[]")))
    has_scheme = "://" in text
    try:
        parts = urlsplit(text if has_scheme else f"//{text}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    if port is None and has_scheme:
        port = DEFAULT_PORTS.get(parts.scheme.lower())
    host = host.rstrip(".").lower()
    with contextlib.suppress(ValueError):
        host = normal_ip(host)
    return Address(host, port)


def normal_ip(text: str) -> str:
    """An IP's one spelling: compressed, and an IPv4-mapped IPv6 address (``::ffff:10.0.0.5``, which a
    dual-stack socket uses for IPv4 peers) as the IPv4 address it stands for; ValueError if not an IP."""
    ip = ipaddress.ip_address(text)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped or ip)


@dataclasses.dataclass(frozen=True)
class DomainMatch:
    """Which part of the failure domain an address fell in, and why that part is there."""

    part: str  # the failure-domain key, e.g. "service_cidrs"
    value: str  # the entry matched, e.g. "10.96.0.0/16"
    how: str  # "same endpoint", "same host", "in network", "cluster DNS name", "Ingress wildcard"
    evidence: str = ""  # where the entry came from at backup time (e.g. "ServiceCIDR kubernetes")

    def describe(self, address: str) -> str:
        where = f" ({self.evidence})" if self.evidence else ""
        return f"{address}: {self.how} {self.value} in {self.part}{where}"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Entry:
    part: str
    value: str
    address: Address


class FailureDomain:
    """Everything that dies with the source, as recorded in a backup's manifest."""

    def __init__(self, facts: Mapping[str, Any], evidence: Mapping[str, str] | None = None) -> None:
        self.facts: dict[str, list[str]] = {k: [str(v) for v in _as_list(vs) if v] for k, vs in facts.items()}
        self.evidence = dict(evidence or {})
        self._networks: list[tuple[str, str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
        self._suffixes: list[tuple[str, str]] = []
        self._hosts: list[_Entry] = []
        self._wildcards: list[tuple[str, str]] = []
        for part, values in self.facts.items():
            for value in values:
                self._add(part, value)

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> FailureDomain:
        """The merged facts of every plugin, with the evidence plugins recorded (``failure_domain_evidence``)."""
        evidence: dict[str, str] = {}
        for outcome in manifest.plugins.values():
            for key, text in (outcome.meta.get("failure_domain_evidence") or {}).items():
                evidence.setdefault(key, str(text))
        return cls(manifest.failure_domain, evidence)

    def _add(self, part: str, value: str) -> None:
        if part.endswith("_cidrs"):
            with contextlib.suppress(ValueError):
                self._networks.append((part, value, ipaddress.ip_network(value, strict=False)))
        elif part.endswith("_dns_suffixes"):
            self._suffixes.append((part, value.strip(".").lower()))
        elif value.startswith("*."):
            self._wildcards.append((part, value.lower()))
        else:
            address = parse_address(value)
            if address is not None:
                self._hosts.append(_Entry(part, value, address))

    @property
    def empty(self) -> bool:
        return not any(self.facts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"facts": self.facts, "evidence": self.evidence}

    def match(self, address: str) -> DomainMatch | None:
        """The part of the domain ``address`` (URL, host:port, IP, hostname) falls in, or ``None``.

        Names are not resolved here (the network guard calls this on every connect); analysis.py resolves
        hostnames separately and holds the resulting IPs against the domain too.
        """
        parsed = parse_address(address)
        return self.match_address(parsed) if parsed is not None else None

    def is_inside(self, host: str, port: int | None = None) -> str | None:
        """For a network guard: a one-line reason when ``host``/``port`` lies in the domain, else ``None``."""
        parsed = parse_address(host)
        if parsed is None:
            return None
        found = self.match_address(Address(parsed.host, port))
        return found.describe(str(Address(parsed.host, port))) if found else None

    def match_address(self, address: Address) -> DomainMatch | None:
        return next(self._matches(address), None)

    def _matches(self, address: Address) -> Iterator[DomainMatch]:
        same_host = [e for e in self._hosts if e.address.host == address.host]
        # most specific first: the very endpoint, then the host itself, then another endpoint on that host
        for entry in same_host:
            if entry.address.port is not None and entry.address.port == address.port:
                yield self._found(entry.part, entry.value, "same endpoint as")
        if not address.loopback:  # a loopback host is shared by unrelated services: only the port tells
            for entry in sorted(same_host, key=lambda e: e.address.port is not None):
                yield self._found(entry.part, entry.value, "same host as")
        ip = address.ip
        if ip is not None:
            for part, value, network in self._networks:
                if ip.version == network.version and ip in network:
                    yield self._found(part, value, "inside network")
            return
        for part, suffix in self._suffixes:
            if address.host == suffix or address.host.endswith(f".{suffix}"):
                yield self._found(part, suffix, "a name under the cluster DNS domain")
        if self._suffixes and address.host.split(".")[-1] == SERVICE_LABEL:
            part = self._suffixes[0][0]
            yield self._found(part, f"*.{SERVICE_LABEL}", "a short in-cluster Service name, like")
        for part, pattern in self._wildcards:
            if fnmatch.fnmatchcase(address.host, pattern):
                yield self._found(part, pattern, "a host served by the cluster's wildcard")

    def _found(self, part: str, value: str, how: str) -> DomainMatch:
        return DomainMatch(part, value, how, self.evidence.get(part, ""))


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list | tuple | set):
        return list(value)
    return [value] if value else []
