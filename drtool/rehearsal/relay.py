"""What the rehearsal's namespace may still reach: relayed endpoints, and a resolver that refuses the domain.

The namespace has only loopback (netns.py). What a restore legitimately needs from outside — the store when
it is an S3 endpoint, a PostgreSQL catalog, an existing target cluster's API server — is carried in by a
``TcpRelay``: it listens inside the namespace on the very address (IP and port) the restore will connect
to, and each connection it accepts is made again from the host. Only the endpoints the rehearsal names are
relayed, and never one inside the failure domain.

Names resolve inside only as far as the rehearsal needs: a ``DnsRelay`` listens on each nameserver address of
/etc/resolv.conf and answers, itself, the names of the relayed endpoints, with the addresses they are relayed
on (resolved once, on the host). It forwards nothing: every other name is refused (RCODE 5), a name the
failure domain holds is recorded as a refusal — so a subprocess's lookup of an in-cluster name is as visible
as drtool's own — and any other is noted as blocked. A query is never a way out of the namespace (no name
carries data to a nameserver outside). Relay threads are started before the rehearsal's thread enters the
namespace, so they live on the host (see netns.py).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from drtool.rehearsal.netns import in_namespace

DNS_PORT = 53
NXDOMAIN, REFUSED = 3, 5
A, AAAA, TTL_S = 1, 28, 60
Judge = Callable[[str, int | None], str | None]  # (name, port) -> why it is inside the failure domain, or None
Record = Callable[[str, str], None]  # (name, why): a refused lookup
Note = Callable[[str], None]  # "dns <name>": a lookup outside the domain that the rehearsal does not need


def _family(ip: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def _bound(kind: socket.SocketKind, address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(_family(address[0]), kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    if kind == socket.SOCK_STREAM:
        sock.listen(64)
    return sock


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                end.shutdown(how)


def _wake_and_close(sock: socket.socket) -> None:
    """Close a relay's socket so that its serving thread ends: on Linux, ``close`` alone leaves a thread blocked in
    ``accept`` or ``recvfrom`` blocked for good (a thread and a stack left behind by every rehearsal run from
    Python); ``shutdown`` wakes it first (an unconnected UDP socket is woken too, though the call says ENOTCONN)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class TcpRelay:
    """``address`` inside the namespace, carried to the same address on the host."""

    def __init__(self, namespace: str, address: tuple[str, int]) -> None:
        self.address = address
        self._server = in_namespace(namespace, lambda: _bound(socket.SOCK_STREAM, address))
        threading.Thread(target=self._serve, name=f"drtool-relay-{address[1]}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                inside, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._carry, args=(inside,), daemon=True).start()

    def _carry(self, inside: socket.socket) -> None:
        try:
            outside = socket.create_connection(self.address, timeout=30)
        except OSError:
            inside.close()
            return
        outside.settimeout(None)
        back = threading.Thread(target=_pump, args=(outside, inside), daemon=True)
        back.start()
        _pump(inside, outside)
        back.join()
        inside.close()
        outside.close()

    def close(self) -> None:
        _wake_and_close(self._server)


def resolver(resolv_conf: Path = Path("/etc/resolv.conf")) -> tuple[list[str], list[str]]:
    """(nameservers, search domains) of this host: where its processes, and so the namespace's, send lookups."""
    try:
        lines = [line.split() for line in resolv_conf.read_text().splitlines()]
    except OSError:
        return [], []
    servers = [words[1] for words in lines if len(words) > 1 and words[0] == "nameserver"]
    search = [d.strip(".").lower() for words in lines if words and words[0] in ("search", "domain") for d in words[1:]]
    return servers, search


def question(message: bytes) -> str | None:
    """The name a DNS query asks about (lower case, no trailing dot), or None when it is not a query."""
    if len(message) < 12 or message[2] & 0x80 or struct.unpack_from("!H", message, 4)[0] < 1:
        return None
    labels, at = [], 12
    while at < len(message) and message[at]:
        size = message[at]
        if size & 0xC0 or at + 1 + size > len(message):
            return None
        labels.append(message[at + 1 : at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    return ".".join(labels).lower()


def _question_end(query: bytes) -> int:
    end = 12
    while end < len(query) and query[end]:
        end += 1 + query[end]
    return end + 5  # the root label, QTYPE and QCLASS


def refusal(query: bytes, rcode: int, answers: Sequence[bytes] = ()) -> bytes:
    """An answer to ``query`` with ``rcode`` (REFUSED, NXDOMAIN, 0): same id and question, ``answers``."""
    flags = struct.unpack_from("!H", query, 2)[0]
    flags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode  # QR, opcode and RD kept, RA, RCODE
    header = struct.pack("!HHHHH", flags, 1, len(answers), 0, 0)
    return query[:2] + header + query[12 : _question_end(query)] + b"".join(answers)


def answer(query: bytes, ips: Sequence[str]) -> bytes:
    """``query`` answered with those of ``ips`` its type asks for (A or AAAA; none for any other type)."""
    end = _question_end(query)
    qtype = struct.unpack_from("!H", query, end - 4)[0] if end <= len(query) else 0
    family = {A: socket.AF_INET, AAAA: socket.AF_INET6}.get(qtype)
    records = [
        struct.pack("!HHHIH", 0xC00C, qtype, 1, TTL_S, len(data)) + data  # the name: a pointer to the question's
        for data in (socket.inet_pton(family, ip) for ip in ips if family and _family(ip) == family)
    ]
    return refusal(query, 0, records)


class DnsRelay:
    """A resolver at ``server`` inside the namespace that answers ``names`` (name -> IPs) and nothing else:
    in-domain names refused and recorded, others refused and noted; nothing is forwarded."""

    def __init__(
        self,
        namespace: str,
        server: str,
        search: list[str],
        judge: Judge,
        record: Record,
        names: Mapping[str, Sequence[str]] | None = None,
        note: Note = lambda _name: None,
    ) -> None:
        self.server, self.search, self.judge, self.record = server, search, judge, record
        self.names, self.note = dict(names or {}), note
        self._refused: set[str] = set()  # each name recorded once (resolvers ask for A and AAAA, and retry)
        self._closed = False
        self._sock = in_namespace(namespace, lambda: _bound(socket.SOCK_DGRAM, (server, DNS_PORT)))
        threading.Thread(target=self._serve, name="drtool-dns-relay", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                query, client = self._sock.recvfrom(4096)
            except OSError:
                return
            if self._closed:  # woken by close()
                return
            threading.Thread(target=self._answer, args=(query, client), daemon=True).start()

    def _answer(self, query: bytes, client: tuple[str, int]) -> None:
        name = question(query)
        if name is None:
            return
        meant = self._meant(name)
        why = self.judge(meant, None)
        if why is not None:
            if meant not in self._refused:
                self._refused.add(meant)
                self.record(meant, why)
            self._reply(refusal(query, REFUSED), client)
            return
        if meant != name and self.judge(name, None) is not None:
            self._reply(refusal(query, NXDOMAIN), client)  # a search-list try into the domain: no such name here
            return
        for known in (name, meant):
            if known in self.names:
                self._reply(answer(query, self.names[known]), client)
                return
        self.note(f"dns {meant}")
        self._reply(refusal(query, REFUSED), client)

    def _meant(self, name: str) -> str:
        """The name a program asked for, when ``name`` is the resolver library trying a search domain on it
        (inside a pod, ``api.example.com`` is first tried as ``api.example.com.team.svc.cluster.local``)."""
        for domain in self.search:
            if name.endswith(f".{domain}") and "." in name[: -len(domain) - 1]:
                return name[: -len(domain) - 1]
        return name

    def _reply(self, message: bytes, client: tuple[str, int]) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendto(message, client)

    def close(self) -> None:
        self._closed = True
        _wake_and_close(self._sock)
