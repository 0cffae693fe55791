"""Source, target and restore settings of the dns-certs plugin, parsed once from drtool's mappings.

Values come from a YAML config or from ``-t/-o KEY=VALUE`` (strings), so lists also take a comma-separated
string and flags a "true"/"false" string (drtool.plugin.toolkit.settings). The TSIG secret is never a
setting: ``tsig_key_file`` names a BIND key file (``tsig-keygen`` output), read only when used.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from drtool.durations import parse_duration
from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_bool, as_list, as_number

from .cutover import parse_cutover

EXTERNALDNS_MODES = ("keep", "hold", "release")
# backup: end at the backup's serial (refused when the target is at or ahead of it); raise: a zone changed in
# place since the backup (records removed) gets the backup's records under a serial above the target's
SERIAL_MODES = ("backup", "raise")
DEFAULT_MARGIN = dt.timedelta(days=14)
DEFAULT_DNS_PORT = 53


@dataclasses.dataclass(frozen=True)
class DnsServer:
    """An authoritative server reached for AXFR or RFC 2136 updates, and the TSIG key file to sign with."""

    host: str
    port: int = DEFAULT_DNS_PORT
    key_file: str | None = None
    timeout: float = 30.0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, m: Mapping[str, Any]) -> DnsServer | None:
        """From ``dns_server`` (host or host:port), ``tsig_key_file``, ``dns_timeout``; None without a server."""
        value = str(m.get("dns_server") or "").strip()
        if not value:
            return None
        host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit():
            host, port = value, str(DEFAULT_DNS_PORT)
        key_file = str(m["tsig_key_file"]) if m.get("tsig_key_file") else None
        return cls(host.strip("[]"), int(port), key_file, as_number(m.get("dns_timeout"), 30.0, "dns_timeout"))


def zone_names(value: Any) -> tuple[str, ...]:
    """Zone names, absolute (with the trailing dot), in the order given, without duplicates."""
    out: list[str] = []
    for z in as_list(value):
        name = z.rstrip(".").lower() + "."
        if name not in out:
            out.append(name)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class SourceSettings:
    kubernetes: bool = True  # back up the cert-manager / CoreDNS / ExternalDNS objects
    dns: DnsServer | None = None
    zones: tuple[str, ...] = ()
    cluster_resource_namespace: str = "cert-manager"  # where ClusterIssuers' Secrets live (cert-manager's flag)
    page_size: int = 500

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> SourceSettings:
        settings = cls(
            kubernetes=as_bool(m.get("kubernetes"), True),
            dns=DnsServer.parse(m),
            zones=zone_names(m.get("zones")),
            cluster_resource_namespace=str(m.get("cluster_resource_namespace") or "cert-manager"),
            page_size=max(1, int(as_number(m.get("page_size"), 500, "page_size"))),
        )
        if settings.zones and settings.dns is None:
            raise UsageError("zones are listed but no dns_server", "set dns_server=HOST:PORT (and tsig_key_file)")
        return settings


@dataclasses.dataclass(frozen=True)
class RestoreSettings:
    """Where and how a restore writes. Zones go to ``zone_dir`` as files, to ``dns_server`` by RFC 2136, or both."""

    kubernetes: bool = True
    dns: DnsServer | None = None
    zone_dir: str | None = None
    externaldns: str = "keep"  # keep | hold (upsert-only until released) | release
    rto: dt.timedelta = dt.timedelta(0)
    expiry_margin: dt.timedelta = DEFAULT_MARGIN
    dry_run: bool = False
    cutover: Mapping[str, str] = dataclasses.field(default_factory=dict)  # old LB address -> new (cutover.py)
    serial: str = "backup"  # SERIAL_MODES

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreSettings:
        merged = {**target, **options}
        mode = str(merged.get("externaldns") or "keep").lower()
        if mode not in EXTERNALDNS_MODES:
            raise UsageError(f"externaldns={mode!r} is not a mode", f"choose {', '.join(EXTERNALDNS_MODES)}")
        serial = str(merged.get("serial") or "backup").lower()
        if serial not in SERIAL_MODES:
            raise UsageError(f"serial={serial!r} is not a mode", f"choose {', '.join(SERIAL_MODES)}")
        try:
            rto = parse_duration(merged.get("rto") or 0)
            margin = parse_duration(merged.get("expiry_margin") or DEFAULT_MARGIN)
        except ValueError as exc:
            raise UsageError(str(exc), "rto and expiry_margin take durations such as 4h or 14d") from None
        return cls(
            kubernetes=as_bool(merged.get("kubernetes"), True),
            dns=DnsServer.parse(merged),
            zone_dir=str(merged["zone_dir"]) if merged.get("zone_dir") else None,
            externaldns=mode,
            rto=rto,
            expiry_margin=margin,
            dry_run=as_bool(merged.get("dry_run"), False),
            cutover=parse_cutover(merged.get("cutover")),
            serial=serial,
        )
