"""How a rehearsal keeps the restore away from the failure domain, and what each way covers.

Two modes, and the report says which ran (``Isolation.to_dict()``, in the rehearsal report's ``run``):

- **netns** (the default wherever it is possible: root and iproute2): the rehearsal's thread, and so every
  thread and process the restore starts, runs in a fresh network namespace (netns.py) where only loopback
  exists. The target lab is started in there. What the restore must reach outside — the store's S3 endpoint,
  a PostgreSQL catalog, an existing target cluster — is relayed in on its own address (relay.py), unless it
  lies in the failure domain. Names resolve through a relay that answers the relayed endpoints' names and
  nothing else. Every other attempt is refused by the kernel and seen by the witness (witness.py): one into
  the failure domain is recorded as a refused connection (it fails the rehearsal, as the guard's do), one
  elsewhere as ``blocked``. The in-process guard runs too, so drtool's own attempts are refused with their
  evidence. And the namespace holds what is started in it (confine.py): each program runs in a mount
  namespace of its own, with the host's Unix sockets covered and no capability to ``setns`` out, mount or
  unmount.
- **in-process**: only the guard (guard.py): drtool's own Python connections, datagrams and lookups, in
  drtool's process and in each plan step's (the executor installs the guard there). Other subprocesses and
  C libraries are not covered, and the report says so ("subprocesses unguarded").

``auto`` picks netns when the machine allows it and the target stays inside the rehearsal (a kept lab must
stay reachable afterwards, so ``keep`` picks in-process).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from drtool.errors import UsageError
from drtool.independence.domain import FailureDomain, parse_address
from drtool.rehearsal import confine, netns
from drtool.rehearsal.guard import DNS, NAMESPACE, NetworkGuard
from drtool.rehearsal.relay import DnsRelay, Record, TcpRelay, resolver
from drtool.rehearsal.witness import OnAttempt, Witness

AUTO, NETNS, IN_PROCESS = "auto", "netns", "in-process"
MODES = (AUTO, NETNS, IN_PROCESS)
COVERS = {
    NETNS: "every process the restore starts (subprocesses and C libraries included): a network namespace with "
    "only loopback, the target and the relayed endpoints, that they cannot leave (no capabilities, the host's "
    "Unix sockets covered)",
    IN_PROCESS: "drtool's own Python connections, datagrams and DNS lookups, in each step's process too; "
    "subprocesses unguarded, and so are C libraries that open their own sockets (libpq)",
}


@dataclasses.dataclass
class Isolation:
    mode: str
    why: str  # why this mode ran
    namespace: str | None = None
    relayed: list[str] = dataclasses.field(default_factory=list)  # endpoints carried into the namespace
    blocked: list[str] = dataclasses.field(default_factory=list)  # attempts outside the domain it stopped
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "covers": COVERS[self.mode], "why": self.why, "namespace": self.namespace,
                "relayed": self.relayed, "blocked": sorted(self.blocked)}  # fmt: skip

    def note_blocked(self, address: str) -> None:
        with self._lock:
            if address not in self.blocked:
                self.blocked.append(address)


def choose(requested: str, keep: bool) -> tuple[str, str]:
    """(mode, why) for ``requested`` (auto, netns or in-process); a netns that cannot be is a UsageError."""
    if requested not in MODES:
        raise UsageError(f"isolation {requested!r} is not a mode", f"choose {', '.join(MODES)}")
    impossible = netns.available() or confine.available()
    if requested == NETNS:
        if impossible:
            raise UsageError(f"--isolation netns is not possible here: {impossible}", "use --isolation in-process")
        if keep:
            raise UsageError("--keep needs the target reachable afterwards", "use --isolation in-process with --keep")
        return NETNS, "asked for"
    if requested == IN_PROCESS:
        return IN_PROCESS, "asked for"
    if impossible:
        return IN_PROCESS, impossible
    if keep:
        return IN_PROCESS, "--keep: the target must stay reachable from the host afterwards"
    return NETNS, "possible here (root and iproute2)"


@contextlib.contextmanager
def isolate(
    requested: str, domain: FailureDomain, guard: NetworkGuard, allowed: Iterable[str] = (), *, keep: bool = False
) -> Iterator[Isolation]:
    """The calling thread in the chosen isolation until the block ends (the guard is entered separately)."""
    mode, why = choose(requested, keep)
    isolation = Isolation(mode, why)
    if mode == IN_PROCESS:
        yield isolation
        return
    with netns.namespace() as name, contextlib.ExitStack() as stack:
        isolation.namespace = name
        relayed, names = _relayed(allowed, domain)
        for ip, port in relayed:
            stack.callback(TcpRelay(name, (ip, port)).close)
            isolation.relayed.append(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
        for held in _loopback_ports(domain):  # the source's loopback ports: bound, never listening, so refused
            stack.callback(netns.in_namespace(name, lambda port=held: _reserve(port)).close)
        servers, search = resolver()
        for server in servers:
            relay = DnsRelay(name, server, search, guard.is_inside, _dns_record(guard), names, isolation.note_blocked)
            stack.callback(relay.close)
        witness = Witness(name, _witness_judge(guard, isolation, set(relayed), set(servers)))
        stack.callback(witness.close)
        kept = {os.path.realpath(a) for a in allowed if a.startswith("/")}  # a catalog's Unix socket
        sockets = [s for s in confine.host_sockets() if os.path.realpath(s) not in kept]  # read on the host
        with netns.entered(name), confine.children(sockets):
            yield isolation


def _relayed(allowed: Iterable[str], domain: FailureDomain) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
    """The (IP, port) pairs to carry in: each allowed endpoint outside the domain, its name resolved here; and
    each such name with its IPs (what the namespace's resolver answers, and all it answers)."""
    out: list[tuple[str, int]] = []
    names: dict[str, list[str]] = {}
    for text in allowed:
        address = parse_address(text)
        if address is None or address.port is None or domain.match_address(address) is not None:
            continue
        try:
            infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
        except OSError:
            continue
        for info in infos:
            ip = str(info[4][0])
            if domain.is_inside(ip, address.port) is not None:
                continue
            if (ip, address.port) not in out:
                out.append((ip, address.port))
            if address.ip is None and ip not in names.setdefault(address.host, []):
                names[address.host].append(ip)
    return out, names


def _loopback_ports(domain: FailureDomain) -> list[int]:
    ports = set()
    for values in domain.facts.values():
        for value in values:
            address = parse_address(value)
            if address is not None and address.loopback and address.port:
                ports.add(address.port)
    return sorted(ports)


def _reserve(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    return sock


def _dns_record(guard: NetworkGuard) -> Record:
    def record(name: str, why: str) -> None:
        guard.record(name, None, why, DNS)

    return record


def _witness_judge(
    guard: NetworkGuard, isolation: Isolation, relayed: set[tuple[str, int]], dns: set[str]
) -> OnAttempt:
    """What to make of an attempt the namespace refused: in the domain, a refusal; elsewhere, blocked (a
    loopback port that nothing serves is the target's business, not the domain's)."""

    def judge(protocol: str, ip: str, port: int) -> None:
        if (ip, port) in relayed or (protocol == "udp" and ip in dns):
            return  # carried out, or a lookup (and the resolver relay's answer, sent back from its address)
        why = guard.judge(ip, port)[1]
        if why is not None:
            guard.record(ip, port, why, NAMESPACE)
        elif not ipaddress.ip_address(ip).is_loopback:
            isolation.note_blocked(f"{protocol} {f'[{ip}]' if ':' in ip else ip}:{port}")

    return judge
