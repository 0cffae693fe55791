"""The witness: every connection attempt a process inside the rehearsal's namespace makes, seen on its wire.

In the namespace every address is routed to loopback (netns.py), so a TCP SYN or a UDP datagram to any
address crosses the loopback device before the kernel refuses it. A packet socket on that device, with a
classic BPF filter that passes only TCP SYNs (no ACK) and UDP datagrams, reports each one's destination:
the namespace stops a subprocess (git, curl, helm, libpq) without telling anyone, and the witness is how
the rehearsal still learns what it tried. IPv4 and IPv6 without extension headers are read; loopback
carries Ethernet framing with zero addresses on Linux.
"""

from __future__ import annotations

import ctypes
import socket
import struct
import threading
from collections.abc import Callable

from drtool.rehearsal.netns import in_namespace

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
SNAP = 128  # headers are all the witness reads
OnAttempt = Callable[[str, str, int], None]  # (protocol "tcp"/"udp", destination IP, destination port)

# ldh [12]; ipv4? ldb [23]; udp -> accept; tcp -> ldxb 4*([14]&0xf); ldb [x+27] (flags); ipv6? ldb [20];
# udp -> accept; tcp -> ldb [67] (flags); (flags & (SYN|ACK)) == SYN -> accept; otherwise drop.
_FILTER = (
    (0x28, 0, 0, 12), (0x15, 0, 6, 0x0800), (0x30, 0, 0, 23), (0x15, 11, 0, 17), (0x15, 0, 11, 6),
    (0xB1, 0, 0, 14), (0x50, 0, 0, 27), (0x05, 0, 0, 5), (0x15, 0, 7, 0x86DD), (0x30, 0, 0, 20),
    (0x15, 4, 0, 17), (0x15, 0, 4, 6), (0x30, 0, 0, 67), (0x54, 0, 0, 0x12), (0x15, 0, 1, 0x02),
    (0x06, 0, 0, SNAP), (0x06, 0, 0, 0),
)  # fmt: skip


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _capture_socket() -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    program = (_SockFilter * len(_FILTER))(*(_SockFilter(*op) for op in _FILTER))
    fprog = _SockFprog(len(_FILTER), program)
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(fprog))
    sock.bind(("lo", 0))
    sock.settimeout(0.2)
    return sock


def destination(frame: bytes) -> tuple[str, str, int] | None:
    """(protocol, IP, port) a captured SYN or datagram is for; None for anything else."""
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x0800 and len(frame) >= 34:
        header = (frame[14] & 0x0F) * 4
        proto, ip = frame[23], socket.inet_ntop(socket.AF_INET, frame[30:34])
        offset = 14 + header
    elif ethertype == 0x86DD and len(frame) >= 54:
        proto, ip = frame[20], socket.inet_ntop(socket.AF_INET6, frame[38:54])
        offset = 54
    else:
        return None
    if proto not in (6, 17) or len(frame) < offset + 4:
        return None
    return ("tcp" if proto == 6 else "udp"), ip, struct.unpack_from("!H", frame, offset + 2)[0]


class Witness:
    """Reports each attempt once (outgoing copies only) to ``on_attempt``, from its own thread."""

    def __init__(self, namespace: str, on_attempt: OnAttempt) -> None:
        self.on_attempt = on_attempt
        self._sock = in_namespace(namespace, _capture_socket)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drtool-witness", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                frame, where = self._sock.recvfrom(SNAP)
            except TimeoutError:
                if self._stop.is_set():
                    return  # stopped, and nothing more was queued
                continue
            except OSError:
                return
            if where[2] != socket.PACKET_OUTGOING:
                continue  # loopback shows each packet twice: sent and received
            found = destination(frame)
            if found is not None:
                self.on_attempt(*found)

    def close(self) -> None:
        """Stop after what is already queued has been read."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()
