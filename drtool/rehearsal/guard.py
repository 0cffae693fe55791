"""A network guard for rehearsals: refuse, and record, every connection drtool makes into the failure domain.

A rehearsal proves a restore does not need the system it replaces. Stopping a lab source only shows that
nothing *succeeded* in reaching it; the guard shows that nothing *tried*: it is a ``sys.addaudithook`` hook
on the calls every Python client goes through — ``socket.connect`` (TCP, and UDP sockets that connect),
``socket.sendto`` and ``socket.sendmsg`` (UDP datagrams to an address), ``socket.getaddrinfo`` and
``socket.gethostbyname`` (DNS lookups: an in-domain name is refused before it is resolved) — and it raises
``ConnectionRefusedError`` for an address the failure domain holds, after noting the address, why it
matched, and which plan steps were running.

An address is judged in its one spelling (``spellings``), never as written: the C library takes
``2130706434``, ``0x7f000002``, ``0177.0.0.2`` and ``127.2`` all for 127.0.0.2 (``inet_aton``), so each numeric
form is read the way the connection will be made; an IPv4-mapped IPv6 address (``::ffff:10.0.0.5``, what a
dual-stack socket connects to) is the IPv4 address it stands for; and the local host, under whichever name
(``localhost``, any 127.x address, ``::1``, ``0.0.0.0``, the empty host), is judged as every loopback
address the failure domain may have recorded it by.

Audit hooks cannot be removed, so one hook is installed per process and does nothing unless a guard is
active; its fast path is one comparison per audit event. Each plan step runs in a process of its own
(drtool.plans.step_process): the executor pickles a ``StepProcessGuard`` into it, which installs the same
guard there and reports each refusal back, attributed to that step alone. Other subprocesses (git, helm,
etcdutl, a kubeconfig's exec plugin) and C libraries that open sockets themselves (libpq) are beyond an
audit hook: the network namespace (isolation.py) covers those, and reports what it saw through ``record``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import ipaddress
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

IsInside = Callable[[str, int | None], str | None]  # (host, port) -> why it is inside the domain, or None
_SENDS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})  # (socket, address)
_LOOKUPS = frozenset({"socket.getaddrinfo", "socket.gethostbyname"})  # (host, [port, ...])
_EVENTS = _SENDS | _LOOKUPS
_INET_ATON = re.compile(r"[0-9a-fx.]+")  # what inet_aton may read as an IPv4 address (decimal, octal, hex parts)
LOCAL_HOST = ("127.0.0.1", "::1", "localhost")  # how a failure domain may have written the local host
GUARD, NAMESPACE, DNS = "guard", "namespace", "dns"  # who caught it: this hook, the namespace, its resolver
_active: NetworkGuard | None = None
_installed = False
_install_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Refusal:
    address: str
    reason: str
    steps: tuple[str, ...]  # plan steps running when it happened (all of them: threads cannot be told apart)
    at_s: float
    by: str = GUARD

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "reason": self.reason, "steps": list(self.steps), "at_s": self.at_s,
                "by": self.by}  # fmt: skip


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS:
        return
    guard = _active
    if guard is None:
        return
    if event in _SENDS:
        address = args[1]
        if isinstance(address, tuple) and len(address) >= 2 and isinstance(address[0], str):
            guard.check(address[0], address[1])
        return
    host = args[0]  # getaddrinfo(host, port, family, type, proto, flags) / gethostbyname(host)
    port = args[1] if len(args) > 1 else None
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    numeric = isinstance(port, int) or (isinstance(port, str) and port.isdigit())
    if isinstance(host, str | None):  # None, like "", is the local host
        guard.check(host or "", int(port) if numeric else None)  # type: ignore[arg-type]


def spellings(host: str) -> list[str]:
    """``host`` as the connection will read it (see the module docstring), first, then, for the local host,
    every other loopback spelling the failure domain may hold it under."""
    text = host.strip().strip("[]").lower().rstrip(".")
    if _INET_ATON.fullmatch(text):
        with contextlib.suppress(OSError):
            text = socket.inet_ntoa(socket.inet_aton(text))
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0] if ":" in text else text)
    except ValueError:  # a name; "" (INADDR_ANY) and "localhost" are the local host
        return list(LOCAL_HOST) if text in ("", "localhost") else [text]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    normal = str(ip)
    if ip.is_loopback or ip.is_unspecified:
        return list(dict.fromkeys([normal, *LOCAL_HOST]))
    return [normal]


class NetworkGuard:
    """Active inside its ``with`` block; also the plan executor's ``StepWatcher`` (drtool.plans.executor)."""

    def __init__(self, is_inside: IsInside, on_record: Callable[[str, int | None, str], None] | None = None) -> None:
        self.is_inside = is_inside
        self.on_record = on_record  # told of each refusal as it happens (a step's process reports it back)
        self.refused: list[Refusal] = []
        self.running: set[str] = set()
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def judge(self, host: str, port: int | None) -> tuple[str, str | None]:
        """(``host`` in its one spelling, why that lies in the failure domain or None), whatever the spelling."""
        names = spellings(host)
        for name in names:
            reason = self.is_inside(name, port)
            if reason is not None:
                return names[0], reason if names[0] == host else f"{reason} (written {host!r})"
        return names[0], None

    def check(self, host: str, port: int | None) -> None:
        normal, reason = self.judge(host, port)
        if reason is None:
            return
        self.record(normal, port, reason, GUARD)
        raise ConnectionRefusedError(errno.ECONNREFUSED, f"refused by drtool's rehearsal network guard: {reason}")

    def record(self, host: str, port: int | None, reason: str, by: str, steps: tuple[str, ...] | None = None) -> str:
        """Note an attempt into the domain that was stopped elsewhere (the namespace, its resolver, a step's
        process: that one names its step; otherwise every step running is named)."""
        address = f"[{host}]:{port}" if ":" in host and port else f"{host}:{port}" if port else host
        with self._lock:
            steps = tuple(sorted(self.running)) if steps is None else steps
            self.refused.append(Refusal(address, reason, steps, round(time.monotonic() - self._t0, 3), by))
        if self.on_record is not None:
            self.on_record(host, port, reason)
        return address

    def for_step_processes(self) -> StepProcessGuard:
        return StepProcessGuard(self.is_inside)

    def refused_in_step(self, step_id: str, host: str, port: int | None, reason: str) -> None:
        self.record(host, port, reason, GUARD, steps=(step_id,))

    def step_started(self, step_id: str) -> None:
        with self._lock:
            self.running.add(step_id)

    def step_finished(self, step_id: str) -> list[dict[str, Any]]:
        with self._lock:
            self.running.discard(step_id)
            return [r.to_dict() for r in self.refused if step_id in r.steps]

    def __enter__(self) -> NetworkGuard:
        global _active, _installed
        with _install_lock:
            if not _installed:
                sys.addaudithook(_hook)
                _installed = True
            if _active is not None:
                raise RuntimeError("a network guard is already active in this process")
            _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = None


@dataclasses.dataclass(frozen=True)
class StepProcessGuard:
    """The guard of a plan step's own process: pickled into it, the same judge, each refusal reported back."""

    is_inside: IsInside

    @contextlib.contextmanager
    def active(self, step_id: str, report: Callable[[str, int | None, str], None]) -> Iterator[None]:
        guard = NetworkGuard(self.is_inside, on_record=report)
        guard.step_started(step_id)
        with guard:
            yield
