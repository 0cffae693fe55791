"""HTTP/1.1 pipelining of transactions to one etcd gateway connection (the replay's hot path).

Why: a replay is one transaction per source revision, strictly in order, so transactions cannot be sent
on parallel connections. On one keep-alive connection, Go's HTTP server reads and answers requests one
after another, in the order they arrived: sending a window of requests before reading their answers
keeps that order while the client stops paying a round trip (and Python's per-request overhead) for each.
A failed transaction is only seen when its answer is read, after later ones in its window were applied:
the member is then thrown away with the restore, which never publishes anything.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Callable, Mapping
from typing import Any

from drtool.errors import SourceError

WINDOW = 64  # transactions in flight; their answers (~200 bytes each) must fit the socket buffers
WINDOW_BYTES = 8 * 1024 * 1024

Check = Callable[[dict[str, Any]], None]


class _Shared:
    """One buffered reader shared by consecutive responses; an HTTPResponse must not close it."""

    def __init__(self, fp: Any) -> None:
        self._fp = fp

    def makefile(self, *args: Any, **kwargs: Any) -> _Shared:
        return self

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fp, name)


class TxnPipeline:
    def __init__(self, port: int, path: str = "/v3/kv/txn", timeout: float = 120.0) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._reader = _Shared(self._sock.makefile("rb"))
        self._head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()
        self._out = bytearray()
        self._checks: list[Check] = []

    def submit(self, body: Mapping[str, Any], check: Check) -> None:
        """Queue one transaction; ``check(answer)`` runs when its answer is read (raise to stop)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        self._out += self._head + b"Content-Length: %d\r\n\r\n" % len(data) + data
        self._checks.append(check)
        if len(self._checks) >= WINDOW or len(self._out) >= WINDOW_BYTES:
            self.flush()

    def flush(self) -> None:
        """Send what is queued, then read and check every answer in order."""
        if not self._checks:
            return
        self._sock.sendall(self._out)
        self._out.clear()
        checks, self._checks = self._checks, []
        for check in checks:
            resp = http.client.HTTPResponse(self._reader)  # type: ignore[arg-type]
            resp.begin()
            data = resp.read()
            if resp.status != 200:
                raise SourceError(f"replay member refused a transaction: HTTP {resp.status} {data[:200]!r}")
            check(json.loads(data))

    def close(self) -> None:
        self._sock.close()
