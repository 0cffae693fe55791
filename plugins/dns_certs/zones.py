"""Authoritative zones: AXFR out of a server (TSIG-signed), and back in as a zone file or by RFC 2136 updates.

A zone is held as ``RRsets``: (owner name, type) -> (TTL, sorted rdata texts), names absolute. That one
form is what a backup writes (one master-file line per record, streamed as the transfer arrives), what a
restore computes its update from, and what verify compares exactly, SOA serial included. DNSSEC records
(RRSIG, NSEC, NSEC3, ...) are the signer's output, not data: they are neither written nor compared, and a
signed zone is re-signed by the target's own keys (docs/dns-certs.md).
"""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import dns.exception
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.update
import dns.xfr

from drtool.errors import IntegrityError, SourceError, UsageError, WrongKey
from drtool.plugin.toolkit import paths

from .settings import DnsServer
from .tsig import Tsig

RRsets = dict[tuple[str, str], tuple[int, tuple[str, ...]]]
SIGNER_TYPES = {"RRSIG", "NSEC", "NSEC3", "NSEC3PARAM", "TYPE65534"}
UPDATE_BATCH = 400  # records per UPDATE message: well inside 64 KiB for ordinary records


@dataclasses.dataclass(frozen=True)
class ZoneSummary:
    zone: str
    serial: int
    rrsets: int
    records: int


def _errors(server: DnsServer, zone: str, what: str) -> Callable[[Exception], Exception]:
    """dnspython's failures as drtool's: a refused signature is a wrong key, the rest a source failure."""

    def convert(exc: Exception) -> Exception:
        where = f"{what} of {zone} at {server.address}"
        if isinstance(exc, dns.tsig.PeerError):
            return WrongKey(
                f"{where}: the server rejected the TSIG signature ({type(exc).__name__})",
                "tsig_key_file must hold the key (name, algorithm and secret) the server's zone allows",
            )
        if isinstance(exc, dns.xfr.TransferError) or "REFUSED" in str(exc) or "NOTAUTH" in str(exc):
            return WrongKey(
                f"{where}: refused ({exc})",
                "the server allows transfers and updates only to its TSIG key: set tsig_key_file",
            )
        if isinstance(exc, dns.exception.Timeout):
            return SourceError(f"{where}: timed out after {server.timeout:.0f}s", "is the DNS server up?")
        return SourceError(f"{where}: {type(exc).__name__}: {exc}", "is the DNS server up and authoritative?")

    return convert


def transfer(server: DnsServer, zone: str, key: Tsig | None) -> Iterator[dns.rrset.RRset]:
    """The zone's RRsets as the AXFR streams them (absolute names), the closing SOA left out."""
    convert = _errors(server, zone, "AXFR")
    seen_soa = False
    try:
        for message in dns.query.xfr(
            server.host,
            zone,
            port=server.port,
            relativize=False,
            lifetime=server.timeout,
            **(key.kwargs() if key else {}),
        ):
            for rrset in message.answer:
                if rrset.rdtype == dns.rdatatype.SOA and rrset.name == dns.name.from_text(zone):
                    if seen_soa:
                        continue
                    seen_soa = True
                yield rrset
    except (dns.exception.DNSException, OSError) as exc:
        raise convert(exc) from None


def add(rrsets: RRsets, rrset: dns.rrset.RRset) -> None:
    rdtype = dns.rdatatype.to_text(rrset.rdtype)
    if rdtype in SIGNER_TYPES:
        return
    key = (rrset.name.to_text(), rdtype)
    ttl, old = rrsets.get(key, (rrset.ttl, ()))
    rrsets[key] = (min(ttl, rrset.ttl), tuple(sorted({*old, *(r.to_text() for r in rrset)})))


def master_lines(rrset: dns.rrset.RRset) -> bytes:
    """One master-file line per record, absolute names: readable, diffable, loadable by named."""
    rdtype = dns.rdatatype.to_text(rrset.rdtype)
    if rdtype in SIGNER_TYPES:
        return b""
    return "".join(f"{rrset.name} {rrset.ttl} IN {rdtype} {r.to_text()}\n" for r in rrset).encode()


def serial_of(rrsets: RRsets, zone: str) -> int:
    soa = rrsets.get((zone, "SOA"))
    if not soa:
        raise IntegrityError(f"zone {zone} has no SOA record", "the backup or the target zone is not a whole zone")
    return int(soa[1][0].split()[2])


def summary(zone: str, rrsets: RRsets) -> ZoneSummary:
    return ZoneSummary(zone, serial_of(rrsets, zone), len(rrsets), sum(len(v[1]) for v in rrsets.values()))


def parse(text: bytes | str, zone: str) -> RRsets:
    """The master file a backup (or ``write_file``) wrote: one ``name ttl IN type rdata`` line per record,
    names absolute, rdata in dnspython's canonical text — so a line split is enough, and much faster than a
    general zone-file parser on large zones. Anything else is a damaged backup."""
    out: dict[tuple[str, str], tuple[int, set[str]]] = {}
    body = text.decode() if isinstance(text, bytes) else text
    for number, line in enumerate(body.splitlines(), 1):
        if not line or line.startswith(("$ORIGIN", ";")):
            continue
        fields = line.split(None, 4)
        if len(fields) != 5 or fields[2] != "IN" or not fields[1].isdigit() or not fields[0].endswith("."):
            raise IntegrityError(f"zone {zone}: line {number} is not a `name ttl IN type rdata` record")
        name, ttl, _cls, rdtype, rdata = fields
        old_ttl, rdatas = out.get((name, rdtype), (int(ttl), set()))
        rdatas.add(rdata)
        out[(name, rdtype)] = (min(old_ttl, int(ttl)), rdatas)
    rrsets = {k: (ttl, tuple(sorted(v))) for k, (ttl, v) in out.items()}
    serial_of(rrsets, zone)  # a whole zone has its SOA
    return rrsets


def read(server: DnsServer, zone: str, key: Tsig | None) -> RRsets:
    out: RRsets = {}
    for rrset in transfer(server, zone, key):
        add(out, rrset)
    return out


def without_serial(rrsets: RRsets, zone: str) -> RRsets:
    """``rrsets`` with the SOA's serial blanked: what a zone restored with a raised serial must equal."""
    key = (zone, "SOA")
    if key not in rrsets:
        return rrsets
    ttl, (soa, *rest) = rrsets[key]
    fields = soa.split()
    return {**rrsets, key: (ttl, (" ".join([*fields[:2], "-", *fields[3:]]), *rest))}


def differences(backup: RRsets, live: RRsets) -> list[str]:
    """Every RRset that is missing, extra or different (TTL or records), as one line each, sorted."""
    lines = []
    for key in sorted(set(backup) | set(live)):
        name, rdtype = key
        if key not in live:
            lines.append(f"missing {name} {rdtype}")
        elif key not in backup:
            lines.append(f"extra {name} {rdtype}")
        elif backup[key] != live[key]:
            lines.append(f"differs {name} {rdtype}: {_show(backup[key])} -> {_show(live[key])}")
    return lines


def _show(value: tuple[int, tuple[str, ...]]) -> str:
    ttl, rdatas = value
    return f"ttl {ttl} [{'; '.join(rdatas)}]"


# --- restore: zone file ---------------------------------------------------------------------------


def file_name(zone: str) -> str:
    """``<zone>.zone``, one plain file name: a zone name comes from the backup (``paths.segment``)."""
    return paths.segment(f"{zone.rstrip('.')}.zone", "dns-certs: zone file")


def write_file(directory: str, zone: str, rrsets: RRsets) -> tuple[Path, bool]:
    """Write ``<dir>/<zone>.zone`` atomically (temp file, fsync, rename); (path, changed)."""
    folder = Path(directory).expanduser()
    path = paths.under(folder, file_name(zone), "dns-certs: zone file")
    folder.mkdir(parents=True, exist_ok=True)
    text = zone_text(zone, rrsets)
    if path.exists() and path.read_text() == text:
        return path, False
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path, True


def zone_text(zone: str, rrsets: RRsets) -> str:
    """SOA first (named requires it), then every RRset sorted by name and type."""
    out = io.StringIO()
    out.write(f"$ORIGIN {zone}\n")
    keys = sorted(rrsets, key=lambda k: (k != (zone, "SOA"), dns.name.from_text(k[0]), k[1]))
    for name, rdtype in keys:
        ttl, rdatas = rrsets[(name, rdtype)]
        for rdata in rdatas:
            out.write(f"{name} {ttl} IN {rdtype} {rdata}\n")
    return out.getvalue()


# --- restore: RFC 2136 ----------------------------------------------------------------------------

Op = tuple[int, Callable[[dns.update.UpdateMessage], None]]  # (records it touches, how it adds itself)


@dataclasses.dataclass
class UpdatePlan:
    """One zone's update: RRsets replaced and deleted, sent as ``batches`` of operations, each message
    carrying the SOA with its own serial from ``serials`` (the last one the backup's).

    Why every message sets the serial: a server increments the serial itself after each update that does
    not, so with several messages the zone would end ahead of the backup and the final SOA be ignored.
    Explicit serials that step by one up to the backup's keep every step an increase (RFC 1982) and end
    exactly at the backed-up serial."""

    replace: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    delete: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    batches: list[list[Op]] = dataclasses.field(default_factory=list, repr=False)
    serials: list[int] = dataclasses.field(default_factory=list)
    soa: tuple[int, str] | None = None  # the backup's SOA TTL and rdata, serial replaced per message

    @property
    def empty(self) -> bool:
        return not self.serials

    @property
    def messages(self) -> int:
        return len(self.serials)


def plan_update(zone: str, backup: RRsets, live: RRsets, *, raise_serial: bool = False) -> UpdatePlan:
    """The messages that make ``live`` equal ``backup``, or a refusal (before anything is written) when the
    target's serial leaves no room to end exactly at the backup's. With ``raise_serial`` such a zone (changed
    in place since the backup) gets the backup's records under serials counting up from the target's, so
    secondaries still follow; its SOA then differs from the backup's in the serial only."""
    have, want = serial_of(live, zone), serial_of(backup, zone)
    plan = UpdatePlan()
    for key in sorted(set(backup) | set(live)):
        if key == (zone, "SOA"):
            continue
        if key not in backup:
            plan.delete.append(key)
        elif backup[key] != live.get(key):
            plan.replace.append(key)
    ops: list[Op] = [
        (1, lambda u, n=n, t=t: u.delete(dns.name.from_text(n), t)) for n, t in plan.delete if (n, t) != (zone, "NS")
    ]
    ops += [_replace_op(zone, name, rdtype, backup, live) for name, rdtype in plan.replace]
    soa = (zone, "SOA")
    room = (want - have) % 2**32
    ahead = raise_serial and not 0 < room < 2**31  # changed in place: only the serial may differ in the SOA
    if ahead:
        backup_soa, live_soa = without_serial(backup, zone)[soa], without_serial(live, zone)[soa]
    else:
        backup_soa, live_soa = backup[soa], live.get(soa)
    same = backup_soa == live_soa
    if not ops and same:
        return plan
    plan.batches = list(_batches(ops)) or [[]]
    k = len(plan.batches)
    if raise_serial and not k <= room < 2**31:
        want = (have + k) % 2**32
        room = k
    if not k <= room < 2**31:
        where = (
            f"at or ahead of the backup's {want}"
            if room == 0 or room >= 2**31
            else f"only {room} below the backup's {want}, and the update needs {k} messages"
        )
        raise UsageError(
            f"zone {zone} in the target has serial {have}, {where}: each message must raise the serial (RFC 1982) "
            "and the last must set the backup's, so secondaries follow; nothing was written",
            "restore it as a zone file (zone_dir=...) into a fresh server, or set the target zone's serial below "
            f"{(want - k) % 2**32}",
        )
    plan.serials = [(want - (k - 1 - i)) % 2**32 for i in range(k)]
    ttl, rdatas = backup[(zone, "SOA")]
    plan.soa = (ttl, rdatas[0])
    return plan


def apply_update(server: DnsServer, zone: str, key: Tsig | None, plan: UpdatePlan) -> int:
    """Send the planned messages in order; returns how many were sent."""
    convert = _errors(server, zone, "RFC 2136 update")
    origin = dns.name.from_text(zone)
    assert plan.soa is not None or plan.empty
    for batch, serial in zip(plan.batches, plan.serials, strict=True):
        update = dns.update.UpdateMessage(origin, **(key.kwargs() if key else {}))
        for _n, op in batch:
            op(update)
        ttl, soa = plan.soa  # type: ignore[misc]
        fields = soa.split()
        update.replace(origin, ttl, "SOA", " ".join([*fields[:2], str(serial), *fields[3:]]))
        try:
            response = dns.query.tcp(update, server.host, port=server.port, timeout=server.timeout)
        except (dns.exception.DNSException, OSError) as exc:
            raise convert(exc) from None
        if response.rcode() != dns.rcode.NOERROR:
            text = dns.rcode.to_text(response.rcode())
            if text in ("REFUSED", "NOTAUTH"):
                raise convert(dns.xfr.TransferError(response.rcode()))
            raise SourceError(f"RFC 2136 update of {zone} at {server.address}: {text}", "see the server's log")
    return plan.messages


def _replace_op(zone: str, name: str, rdtype: str, backup: RRsets, live: RRsets) -> Op:
    ttl, rdatas = backup[(name, rdtype)]
    owner = dns.name.from_text(name)
    if (name, rdtype) != (zone, "NS"):
        return len(rdatas), lambda u: u.replace(owner, ttl, rdtype, *rdatas)
    old = sorted(set(live.get((name, rdtype), (ttl, ()))[1]) - set(rdatas))

    def apex_ns(u: dns.update.UpdateMessage) -> None:
        # a zone's last NS record cannot be deleted: add the backup's first, then remove the others
        u.add(owner, ttl, rdtype, *rdatas)
        for extra in old:
            u.delete(owner, dns.rdata.from_text(dns.rdataclass.IN, rdtype, extra))

    return len(rdatas) + len(old), apex_ns


def _batches(ops: Iterable[Op]) -> Iterator[list[Op]]:
    """Group operations into messages of about ``UPDATE_BATCH`` records each, in order."""
    batch: list[Op] = []
    size = 0
    for op in ops:
        if batch and size + op[0] > UPDATE_BATCH:
            yield batch
            batch, size = [], 0
        batch.append(op)
        size += op[0]
    if batch:
        yield batch
