"""Talking to etcd through its gRPC-gateway JSON API (``/v3/...``) with ``requests``.

Why the JSON gateway and not gRPC: it needs no generated stubs or grpcio, it streams the snapshot as
newline-delimited JSON, and every etcd since 3.4 serves it on the client port. Bytes (keys, values,
snapshot blobs) are base64 in JSON and 64-bit integers are strings; this module hides both.

Every network failure becomes a one-line ``SourceError`` with a hint, because the core prints exactly
that line when a backup turns partial.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import ssl
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlparse

import requests

from drtool.binaries import etcd_binary
from drtool.environ import child_env
from drtool.errors import SourceError, UsageError

DEFAULT_TIMEOUT = 10.0
PAGE_SIZE = 500  # Kubernetes objects reach 1.5 MiB; bounds one page in memory
ALL_KEYS = b"\0"  # as key and range_end: the whole keyspace
UNREACHABLE_HINT = "check ETCD_ENDPOINTS / that etcd is running"
TLS_HINT = (
    "check ETCD_CACERT / ETCD_CERT / ETCD_KEY: the CA must sign etcd's certificate and etcd must trust the client's"
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


@dataclasses.dataclass(frozen=True)
class EtcdSettings:
    """Where etcd is and how to authenticate; from plugin settings, else the lab's ETCD_* variables."""

    endpoints: tuple[str, ...]
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> EtcdSettings:
        env = os.environ if environ is None else environ
        raw = settings.get("endpoints") or env.get("ETCD_ENDPOINTS") or ""
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        tls = {k: settings.get(k) or env.get(f"ETCD_{k.upper()}") or None for k in ("cacert", "cert", "key")}
        secure = bool(tls["cacert"] or tls["cert"])
        endpoints = tuple(_normalize(str(e).strip(), secure) for e in items if str(e).strip())
        if not endpoints:
            raise UsageError("no etcd endpoint configured", "set `endpoints` in the source or ETCD_ENDPOINTS")
        if bool(tls["cert"]) != bool(tls["key"]):
            raise UsageError("etcd client TLS needs both a certificate and a key", "set both ETCD_CERT and ETCD_KEY")
        for name, path in tls.items():
            if path and not os.path.isfile(path):
                raise UsageError(f"etcd {name} file {path} does not exist", TLS_HINT)
        timeout = float(settings.get("timeout") or env.get("ETCD_TIMEOUT") or DEFAULT_TIMEOUT)
        return cls(endpoints, tls["cacert"], tls["cert"], tls["key"], timeout)

    def with_endpoint(self, endpoint: str) -> EtcdSettings:
        return dataclasses.replace(self, endpoints=(endpoint,))

    def tls_flags(self) -> list[str]:
        """The same TLS material as etcdctl flags."""
        flags = [f"--cacert={self.cacert}"] if self.cacert else []
        return flags + ([f"--cert={self.cert}", f"--key={self.key}"] if self.cert else [])


def _normalize(endpoint: str, tls: bool) -> str:
    """``host:port`` (etcdctl style) gets a scheme; a trailing slash is dropped."""
    if "://" not in endpoint:
        endpoint = f"{'https' if tls else 'http'}://{endpoint}"
    return endpoint.rstrip("/")


def host_of(url: str) -> str:
    return urlparse(url).hostname or url


def _inner(exc: BaseException) -> BaseException:
    """The root cause under requests' and urllib3's wrappers (``reason`` attributes, args, __cause__)."""
    for _ in range(10):
        reason = getattr(exc, "reason", None)
        nested = [a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)]
        step = reason if isinstance(reason, BaseException) else (nested[-1] if nested else exc.__cause__)
        if step is None:
            break
        exc = step
    return exc


def _reason(exc: BaseException) -> str:
    """The root cause of a requests/urllib3 failure, in a few words."""
    inner = _inner(exc)
    if isinstance(inner, ConnectionRefusedError):
        return "connection refused"
    if isinstance(inner, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {inner.verify_message}"
    if isinstance(inner, ssl.SSLError) and inner.reason:
        return inner.reason.lower().replace("_", " ")
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    text = str(inner.args[0] if inner.args else inner) or type(inner).__name__
    return " ".join(text.split())[:200]


class EtcdClient:
    """One endpoint of one etcd cluster; use as a context manager to close its connection pool."""

    def __init__(self, settings: EtcdSettings, endpoint: str | None = None) -> None:
        self.settings = settings
        self.endpoint = endpoint or settings.endpoints[0]
        self._http = requests.Session()
        # passed with every request: a Session-level `verify` loses to REQUESTS_CA_BUNDLE (psf/requests#3829)
        self._tls: dict[str, Any] = {
            "verify": settings.cacert or True,
            "cert": (settings.cert, settings.key) if settings.cert else None,
        }

    def __enter__(self) -> EtcdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Translate transport failures into one-line SourceErrors naming the endpoint."""
        try:
            yield
        except requests.exceptions.SSLError as exc:
            raise SourceError(f"TLS with etcd at {self.endpoint} failed: {_reason(exc)}", TLS_HINT) from None
        except requests.exceptions.Timeout:
            raise SourceError(
                f"etcd at {self.endpoint} is unreachable: no answer to {what} within {self.settings.timeout:g}s",
                UNREACHABLE_HINT,
            ) from None
        except requests.exceptions.ConnectionError as exc:
            raise SourceError(f"etcd at {self.endpoint} is unreachable: {_reason(exc)}", UNREACHABLE_HINT) from None
        except (requests.exceptions.RequestException, OSError) as exc:
            raise SourceError(f"{what} on etcd at {self.endpoint} failed: {_reason(exc)}", UNREACHABLE_HINT) from None

    def _post(
        self, path: str, body: Mapping[str, Any], *, stream: bool = False, allow: tuple[int, ...] = ()
    ) -> requests.Response:
        with self._errors(path):
            resp = self._http.post(
                f"{self.endpoint}{path}",
                json=dict(body),
                stream=stream,
                timeout=(self.settings.timeout, self.settings.timeout),
                **self._tls,
            )
        if resp.status_code != 200 and resp.status_code not in allow:
            raise _http_error(self.endpoint, path, resp)
        return resp

    def _json(self, resp: requests.Response, path: str) -> dict[str, Any]:
        with self._errors(path):
            try:
                return resp.json()
            except ValueError:
                raise SourceError(f"etcd at {self.endpoint} answered {path} with something not JSON") from None

    def call(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._json(self._post(path, body or {}), path)

    def status(self) -> dict[str, Any]:
        return self.call("/v3/maintenance/status")

    def members(self) -> list[dict[str, Any]]:
        return self.call("/v3/cluster/member/list").get("members", [])

    def healthy(self) -> tuple[bool, str]:
        """etcd's own /health: true only when the member has a leader and can serve linearizable reads."""
        with self._errors("/health"):
            resp = self._http.get(f"{self.endpoint}/health", timeout=self.settings.timeout, **self._tls)
        try:
            body = resp.json()
        except ValueError:
            return False, f"HTTP {resp.status_code}"
        return body.get("health") == "true", body.get("reason") or f"health={body.get('health')}"

    def count(self, revision: int = 0) -> int:
        body = {"key": b64(ALL_KEYS), "range_end": b64(ALL_KEYS), "count_only": True, "revision": revision}
        return int(self.call("/v3/kv/range", body).get("count", 0))

    def iter_kvs(self, revision: int, page: int = PAGE_SIZE) -> Iterator[dict[str, Any]]:
        """Every key-value at ``revision`` in key order, one page in memory at a time."""
        start = ALL_KEYS
        while True:
            body = {"key": b64(start), "range_end": b64(ALL_KEYS), "limit": page, "revision": revision}
            result = self.call("/v3/kv/range", body)
            kvs = result.get("kvs", [])
            yield from kvs
            if not result.get("more") or not kvs:
                return
            start = unb64(kvs[-1]["key"]) + b"\0"

    def snapshot_messages(self) -> Iterator[dict[str, Any]]:
        """The Maintenance.Snapshot stream: one ``result`` dict per message (blob, remaining_bytes, header)."""
        path = "/v3/maintenance/snapshot"
        resp = self.open_stream(path, {})
        with resp, self._errors(path):
            for line in resp.iter_lines(chunk_size=64 * 1024, delimiter=b"\n"):
                if line.strip():
                    yield stream_result(self.endpoint, line, path)

    def open_stream(self, path: str, body: Mapping[str, Any], read_timeout: float | None = None) -> requests.Response:
        """A streaming gateway call (snapshot, watch); read its lines and pass each to ``stream_result``."""
        if read_timeout is None:
            return self._post(path, body, stream=True)
        with self._errors(path):
            resp = self._http.post(
                f"{self.endpoint}{path}",
                json=dict(body),
                stream=True,
                timeout=(self.settings.timeout, read_timeout),
                **self._tls,
            )
        if resp.status_code != 200:
            raise _http_error(self.endpoint, path, resp)
        return resp

    def hashkv(self, revision: int) -> dict[str, int] | None:
        """HashKV at ``revision``: {hash, compact_revision, revision}; None when etcd cannot tell.

        etcd 3.5's gateway maps HashKV and Hash to the same path (Hash wins), so when the gateway has no
        ``/v3/maintenance/hashkv`` this asks etcdctl, which speaks gRPC.
        """
        path = "/v3/maintenance/hashkv"
        resp = self._post(path, {"revision": revision}, allow=(404,))
        body = self._json(resp, path) if resp.status_code == 200 else self._hashkv_etcdctl(revision)
        if not body or "hash" not in body:
            return None
        header = body.get("header", {})
        return {
            "hash": int(body["hash"]),
            "compact_revision": int(body.get("compact_revision", 0)),
            "revision": int(header.get("revision", revision)),
        }

    def _hashkv_etcdctl(self, revision: int) -> dict[str, Any] | None:
        argv = [
            etcd_binary("etcdctl"),
            f"--endpoints={self.endpoint}",
            *self.settings.tls_flags(),
            f"--command-timeout={self.settings.timeout:g}s",
            "-w",
            "json",
            "endpoint",
            "hashkv",
            f"--rev={revision}",
        ]
        try:
            timeout = self.settings.timeout + 5
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=child_env())
        except subprocess.TimeoutExpired:
            raise SourceError(f"etcdctl hashkv on {self.endpoint} timed out", UNREACHABLE_HINT) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SourceError(f"hashkv at revision {revision} on etcd at {self.endpoint} failed: {last}")
        answers = json.loads(done.stdout or "[]")
        return answers[0].get("HashKV") if answers else None


def _http_error(endpoint: str, path: str, resp: requests.Response) -> SourceError:
    try:
        message = resp.json().get("message") or resp.text
    except ValueError:
        message = resp.text
    hint = None
    if resp.status_code in (401, 403):
        hint = "etcd has authentication enabled; give the client a certificate whose CN is an etcd user"
    detail = " ".join(message.split())[:300]
    return SourceError(f"etcd at {endpoint} answered {path} with HTTP {resp.status_code}: {detail}", hint)


def stream_result(endpoint: str, line: bytes, path: str) -> dict[str, Any]:
    """One message of a gateway stream; an ``error`` message (etcd aborted the stream) is a SourceError."""
    try:
        message = json.loads(line)
    except ValueError:
        raise SourceError(f"etcd at {endpoint} sent a malformed message on {path}", UNREACHABLE_HINT) from None
    if "error" in message:
        error = message["error"]
        text = error.get("message") if isinstance(error, dict) else str(error)
        raise SourceError(f"etcd at {endpoint} aborted {path}: {text}")
    return message.get("result", {})


def connect(settings: EtcdSettings) -> tuple[EtcdClient, dict[str, Any]]:
    """The first endpoint that answers a status request, with that status (one endpoint per snapshot)."""
    failures: list[SourceError] = []
    for endpoint in settings.endpoints:
        client = EtcdClient(settings, endpoint)
        try:
            return client, client.status()
        except SourceError as exc:
            client.__exit__()
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    raise SourceError("no etcd endpoint answered: " + "; ".join(f.message for f in failures), UNREACHABLE_HINT)
