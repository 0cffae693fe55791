"""Ports for the lab's and tests' servers: never the same one twice on the machine, never one a socket holds.

A lab's kube-scheduler exited here, and most likely CI's cert-manager too, with its health port taken between
choosing and binding (bind(0) numbers come from the ephemeral range, which other workers' bind(0) and every
outgoing connection draw from). Real
processes and sockets; no server starts.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from drtool.servers import ports

RESERVE = """
import json, sys
from drtool.servers.ports import free_port
print(json.dumps([free_port() for _ in range({n})]), flush=True)
sys.stdin.read()  # hold the reservations until the test has read the other process's ports
"""


def reservers(n: int, count: int) -> list[list[int]]:
    """``count`` processes reserving ``n`` ports each at the same time, all still alive when read."""
    procs = [
        subprocess.Popen([sys.executable, "-c", RESERVE.format(n=n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(count)
    ]
    try:
        return [json.loads(p.stdout.readline()) for p in procs if p.stdout]
    finally:
        for p in procs:
            p.communicate(timeout=60)


def test_processes_reserving_at_once_never_get_the_same_port_and_none_from_the_ephemeral_range() -> None:
    mine = ports.free_port()
    got = reservers(300, 3)
    every = [p for ps in got for p in ps]
    assert len(every) == len(set(every)) == 900 and mine not in every
    low, high = ports.ephemeral_range()
    assert not [p for p in [mine, *every] if low <= p <= high or p < ports.FLOOR]


@pytest.fixture
def listening() -> Iterator[tuple[int, int]]:
    """A listener and a connection to it whose source port is bound explicitly: two candidate ports held."""
    server = socket.socket()
    client = socket.socket()
    try:
        held = []
        for sock in (server, client):
            for port in ports.candidates():
                try:
                    sock.bind(("127.0.0.1", port))
                    held.append(port)
                    break
                except OSError:
                    continue
        server.listen()
        client.connect(server.getsockname())
        yield held[0], held[1]
    finally:
        client.close()
        server.close()


def test_a_port_a_listener_or_a_connection_holds_is_never_reserved(listening: tuple[int, int]) -> None:
    listener, source = listening
    assert not ports.reserve(listener)
    assert not ports.reserve(source)


def test_outside_the_ephemeral_range_unless_nothing_is_left_outside_it() -> None:
    assert not [p for p in ports.candidates((32768, 60999)) if 32768 <= p <= 60999]
    assert ports.candidates((1024, 65535)) == list(range(1024, 65536))
