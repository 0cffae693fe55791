"""A thin, fast client for the Kubernetes API: kubeconfig loading from ``kubernetes``, HTTP from ``urllib3``.

Why not the ``kubernetes`` package's API classes: they deserialize every object into generated models,
which costs more than the whole rest of a backup at tens of thousands of objects, and they do not know
custom resources. Why not ``requests``: per call it re-reads proxy settings, ``~/.netrc`` and CA paths
from disk, which on a fast network costs more than the call; ``urllib3`` (what requests is built on)
with one prepared TLS context does not. Bodies are parsed with ``json.loads`` straight from the bytes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3

from drtool.errors import SourceError
from drtool.plugin.toolkit import paths

from .kubeconfig import load_configuration, proxy_url, ssl_context
from .settings import Connection

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: the API server accepts JSON bodies here
FIELD_MANAGER = "drtool"
_TOKEN_REFRESH = 60.0  # seconds between exec/OIDC token refresh checks
RETRY_STATUSES = (429, 500, 502, 503, 504)
RETRIES = 5
CONNECTION_RETRIES = 2
_KNOWN = {s.value for s in HTTPStatus}
POOL_SIZE = 32  # connections kept per API server: more than any worker pool drtool runs
log = logging.getLogger(__name__)


class ApiError(SourceError):
    """The API server answered with an error status; ``status`` and ``reason`` say which."""

    def __init__(self, status: int, reason: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status
        self.reason = reason
        self.continue_token: str | None = None
        self.details: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)


class KubeClient:
    """HTTP to one API server with the credentials of a loaded kubeconfig; safe to share between threads."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.cfg = load_configuration(conn)
        self.server = self.cfg.host.rstrip("/")
        self._auth_lock = threading.Lock()
        self._auth: dict[str, str] = {}
        self._auth_at = 0.0
        timeout = urllib3.Timeout(connect=conn.connect_timeout, read=conn.timeout)
        pool: dict[str, Any] = {"maxsize": POOL_SIZE, "timeout": timeout, "retries": False}
        if self.server.startswith("https"):
            pool["ssl_context"] = ssl_context(self.cfg)
            if getattr(self.cfg, "tls_server_name", None):
                pool["server_hostname"] = self.cfg.tls_server_name
        proxy = proxy_url(self.cfg, self.server)
        self._http = urllib3.ProxyManager(proxy, **pool) if proxy else urllib3.PoolManager(**pool)

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or self.server

    def _auth_headers(self) -> dict[str, str]:
        """Bearer tokens (static, exec plugin, OIDC), refreshed when the kubeconfig's loader says so."""
        with self._auth_lock:
            if time.monotonic() - self._auth_at > _TOKEN_REFRESH:
                if self.cfg.refresh_api_key_hook is not None:
                    self.cfg.refresh_api_key_hook(self.cfg)
                settings = self.cfg.auth_settings().values()
                self._auth = {s["key"]: s["value"] for s in settings if s.get("in") == "header" and s.get("value")}
                self._auth_at = time.monotonic()
            return self._auth

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        accept: str = JSON,
        ok: tuple[int, ...] = (200, 201),
    ) -> Response:
        """One HTTP call; connection failures and unexpected statuses become one-line errors.

        Every call drtool makes is idempotent (GET, LIST, server-side apply, replace at a resourceVersion; a
        create retried after it landed answers 409, which its caller takes as "exists"), so throttling (429,
        with the server's Retry-After), an overloaded server (5xx) and a dropped connection are retried a few
        times.
        """
        paths.url_path(path, "Kubernetes API path")  # object names come from backups: no `..` to another resource
        headers = {"Accept": accept, **self._auth_headers()}
        if body is not None:
            headers["Content-Type"] = content_type
        headers["Accept-Encoding"] = "gzip" if self.conn.compress else "identity"
        url = self.server + path + (f"?{urlencode(params)}" if params else "")
        for attempt in range(RETRIES + 1):
            try:
                raw = self._http.request(method, url, body=body, headers=headers, preload_content=True)
            except urllib3.exceptions.HTTPError as exc:
                if attempt < CONNECTION_RETRIES:
                    log.debug("%s %s: %s, retrying (attempt %d)", method, path, _short(exc), attempt + 1)
                    time.sleep(_backoff(attempt, None))
                    continue
                raise SourceError(
                    f"kubernetes API {self.server} unreachable ({method} {path}): {_short(exc)}",
                    "is the API server up and the kubeconfig right?",
                ) from None
            if raw.status in RETRY_STATUSES and attempt < RETRIES:
                delay = _backoff(attempt, raw.headers.get("Retry-After"))
                log.debug("%s %s: %d, retrying in %.1f s (attempt %d)", method, path, raw.status, delay, attempt + 1)
                time.sleep(delay)
                continue
            break
        resp = Response(raw.status, raw.headers, raw.data)
        if resp.status not in ok:
            raise api_error(resp, method, path)
        return resp

    def watch(self, path: str, params: Mapping[str, Any], read_timeout: float) -> Iterator[dict[str, Any]]:
        """A WATCH (``watch=1``) as a stream of its events, one parsed JSON line each, until the server ends
        it (``timeoutSeconds``) or nothing arrives for ``read_timeout`` seconds (bookmarks keep a healthy
        stream talking); an error status or a dropped connection is a ``SourceError`` like ``request``'s."""
        paths.url_path(path, "Kubernetes API path")
        headers = {"Accept": JSON, "Accept-Encoding": "identity", **self._auth_headers()}
        url = f"{self.server}{path}?{urlencode({**params, 'watch': '1'})}"
        timeout = urllib3.Timeout(connect=self.conn.connect_timeout, read=read_timeout)
        try:
            raw = self._http.request("GET", url, headers=headers, preload_content=False, timeout=timeout)
        except urllib3.exceptions.HTTPError as exc:
            raise SourceError(f"kubernetes API {self.server} unreachable (WATCH {path}): {_short(exc)}") from None
        try:
            if raw.status != 200:
                raise api_error(Response(raw.status, raw.headers, raw.read()), "WATCH", path)
            rest = b""
            for chunk in raw.stream(64 * 1024):
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(f"kubernetes API {self.server}: watch {path} broke: {_short(exc)}") from None
        finally:
            raw.close()  # a watch ended early must not hand a half-read connection back to the pool
            raw.release_conn()

    def get(self, path: str, params: Mapping[str, Any] | None = None, accept: str = JSON) -> dict[str, Any]:
        return self.request("GET", path, params=params, accept=accept).json()

    def list_pages(
        self, path: str, params: Mapping[str, Any] | None = None, *, limit: int = 500, accept: str = JSON
    ) -> Iterator[dict[str, Any]]:
        """LIST in pages of ``limit`` (memory stays flat); yields each page's parsed body.

        When a continue token expires mid-list (410), the server's fresh token continues the list at a
        newer revision; the pages then no longer form one snapshot, and ``page["inconsistent"]`` says so.
        """
        query = {**(params or {}), "limit": limit}
        inconsistent = False
        pages = 0
        while True:
            try:
                page = self.get(path, query, accept=accept)
            except ApiError as exc:
                token = exc.continue_token
                if exc.status != 410 or not token:
                    raise
                query["continue"], inconsistent = token, True
                continue
            except SourceError as exc:
                if not pages:
                    raise
                # the server went away between pages: say so, so nobody mistakes the pages read for the list
                raise SourceError(f"{exc.message} after {pages} page(s): the list is incomplete", exc.hint) from None
            pages += 1
            page["inconsistent"] = inconsistent
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            query["continue"] = token


def api_error(resp: Response, method: str, path: str) -> ApiError:
    """Turn a Status body (or whatever came back) into an ``ApiError`` with the server's own message."""
    try:
        status = json.loads(resp.data)
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    phrase = HTTPStatus(resp.status).phrase if resp.status in _KNOWN else ""
    reason = status.get("reason") or phrase
    message = status.get("message") or resp.data[:200].decode(errors="replace").strip() or reason
    hint = {401: "the kubeconfig's credentials were refused", 403: "the identity lacks RBAC permission"}
    err = ApiError(
        resp.status,
        reason,
        f"kubernetes API {method} {path}: {resp.status} {reason}: {message}",
        hint.get(resp.status),
    )
    err.continue_token = (status.get("metadata") or {}).get("continue")
    err.details = status.get("details") or {}
    return err


def _backoff(attempt: int, retry_after: str | None) -> float:
    try:
        return min(10.0, float(retry_after)) if retry_after else min(5.0, 0.2 * 2**attempt)
    except ValueError:
        return min(5.0, 0.2 * 2**attempt)


def _short(exc: Exception) -> str:
    """The innermost reason of a urllib3 error, without the long wrapper chain."""
    text = str(exc)
    for marker in ("Connection refused", "timed out", "Connection reset", "Name or service not known"):
        if marker in text:
            return marker
    if "RemoteDisconnected" in text or "Connection aborted" in text:
        return "connection closed by the server"
    return text[:160]
