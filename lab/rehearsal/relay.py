"""What the rehearsal's namespace may still reach: relayed endpoints, and a resolver that refuses the domain.

The namespace has only loopback (netns.py). What a restore legitimately needs from outside — the store when
it is an S3 endpoint, a PostgreSQL catalog, an existing target cluster's API server — is carried in by a
``TcpRelay``: it listens inside the namespace on the very address (IP and port) the restore will connect
to, and each connection it accepts is made again from the host. Only the endpoints the rehearsal names are
relayed, and never one inside the failure domain.

Names still resolve inside: a ``DnsRelay`` listens on each nameserver address of /etc/resolv.conf, refuses
(RCODE 5) every name the failure domain holds — recording it, so a subprocess's lookup of an in-cluster name
is as visible as drtool's own — and forwards the rest to the real nameserver. Relay threads are started
before the rehearsal's thread enters the namespace, so they live on the host (see netns.py).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from drtool_lab.rehearsal.netns import in_namespace

DNS_PORT = 53
DNS_TIMEOUT_S = 3.0
NXDOMAIN, REFUSED = 3, 5
Judge = Callable[[str, int | None], str | None]  # (name, port) -> why it is inside the failure domain, or None
Record = Callable[[str, str], None]  # (name, why): a refused lookup


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
        self._server.close()


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


def refusal(query: bytes, rcode: int) -> bytes:
    """An answer to ``query`` with ``rcode`` (REFUSED, NXDOMAIN): same id and question, no records."""
    flags = struct.unpack_from("!H", query, 2)[0]
    flags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode  # QR, opcode and RD kept, RA, RCODE
    end = 12
    while end < len(query) and query[end]:
        end += 1 + query[end]
    return query[:2] + struct.pack("!HHHHH", flags, 1, 0, 0, 0) + query[12 : end + 5]


class DnsRelay:
    """A resolver at ``server`` inside the namespace: in-domain names refused and recorded, others forwarded."""

    def __init__(self, namespace: str, server: str, search: list[str], judge: Judge, record: Record) -> None:
        self.server, self.search, self.judge, self.record = server, search, judge, record
        self._refused: set[str] = set()  # each name recorded once (resolvers ask for A and AAAA, and retry)
        self._sock = in_namespace(namespace, lambda: _bound(socket.SOCK_DGRAM, (server, DNS_PORT)))
        threading.Thread(target=self._serve, name="drtool-dns-relay", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                query, client = self._sock.recvfrom(4096)
            except OSError:
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
        with socket.socket(_family(self.server), socket.SOCK_DGRAM) as upstream:
            upstream.settimeout(DNS_TIMEOUT_S)
            try:
                upstream.sendto(query, (self.server, DNS_PORT))
                self._reply(upstream.recv(65535), client)
            except OSError:
                pass  # the client times out as it would have without the namespace

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
        self._sock.close()
