"""A small client for the OCI distribution API (v1.1) over ``requests``: manifests, blobs, referrers, tags.

Only what a by-digest copy needs. Blobs stream in both directions (``iter_content`` out, a generator body
with chunked transfer encoding in), so memory stays flat whatever the layer size; a blob upload is one
POST, one streamed PATCH and the closing PUT with the digest, which the registry checks before it keeps
anything. Registries on loopback are spoken to over plain HTTP, every other over HTTPS unless
``plain_http`` says otherwise.

Authentication follows the registry's challenge (``WWW-Authenticate`` on a 401): ``Basic`` sends the
credentials; ``Bearer`` fetches a token from the challenge's realm for its service and scope (with the
credentials when there are any, anonymously otherwise) and sends that. The Authorization header is then kept
per repository, so that a blob upload's streamed PATCH (which cannot be replayed) goes out already
authorised by the POST before it. Credentials are never logged or put in an error message.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import requests

from drtool.errors import IntegrityError, NotFound, SourceError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEXES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST)
ACCEPT = ", ".join(MANIFEST_TYPES)
CHUNK = 1 << 20
TIMEOUT = (10, 300)
MAX_MANIFEST = 4 << 20  # the limit registries apply to manifests; guards against a runaway response


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def referrers_tag(digest: str) -> str:
    """The OCI 1.1 fallback tag under which a registry without the referrers API lists a manifest's referrers."""
    return digest.replace(":", "-")


def children(manifest: dict[str, Any], media_type: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(child manifests, blobs) a manifest names: an index's manifests, or an image's config and layers."""
    if media_type in INDEXES or "manifests" in manifest:
        return list(manifest.get("manifests") or []), []
    blobs = [manifest["config"]] if manifest.get("config") else []
    return [], blobs + list(manifest.get("layers") or [])


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in ("localhost", "::1", "[::1]") or name.startswith("127.")


_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_REPO = re.compile(r"/v2/(.+?)/(?:manifests|blobs|tags|referrers)/")


def _repository(url: str) -> str:
    found = _REPO.search(url)
    return found.group(1) if found else ""


# the distribution spec's grammar: a name never holds '..' or an empty segment, a reference never a '/'
_NAME = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Za-z0-9=_-]+")
_NAME_HINT = "names and references come from backups and workloads; a forged backup can carry any text"


def valid_name(repo: str) -> str:
    if not isinstance(repo, str) or len(repo) > 255 or not _NAME.fullmatch(repo):
        raise IntegrityError(f"{repo!r} is not an OCI repository name: refused", _NAME_HINT)
    return repo


def valid_digest(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise IntegrityError(f"{digest!r} is not an OCI digest: refused", _NAME_HINT)
    return digest


def valid_reference(reference: str) -> str:
    if isinstance(reference, str) and _TAG.fullmatch(reference):
        return reference
    return valid_digest(reference)


class Registry:
    """One registry host; thread-safe (one ``requests.Session`` per thread, a lock around the token cache)."""

    def __init__(self, host: str, plain_http: bool | None = None, credentials: tuple[str, str] | None = None) -> None:
        self.host = host
        http = is_loopback(host) if plain_http is None else plain_http
        self.base = f"{'http' if http else 'https'}://{host}"
        self._local = threading.local()
        self._credentials = credentials
        self._authorization: dict[str, str] = {}  # repository -> Authorization header that worked
        self._auth_lock = threading.Lock()

    @property
    def _http(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        full = url if url.startswith("http") else self.base + url
        headers = dict(kwargs.pop("headers", None) or {})
        with self._auth_lock:
            known = self._authorization.get(_repository(full))
        if known:
            headers["Authorization"] = known
        try:
            return self._http.request(method, full, timeout=TIMEOUT, headers=headers, **kwargs)
        except requests.RequestException as exc:
            raise SourceError(
                f"registry {self.host} unreachable ({method} {url.split('?')[0]}): {type(exc).__name__}",
                "is the registry up, and is plain_http right for it?",
            ) from None

    def _authorize(self, resp: requests.Response) -> bool:
        """Answer a 401's challenge; True when a new Authorization header is stored for the repository."""
        scheme, _, params = resp.headers.get("WWW-Authenticate", "").partition(" ")
        repo = _repository(resp.url)
        sent = resp.request.headers.get("Authorization")
        with self._auth_lock:
            current = self._authorization.get(repo)
        if current and current != sent:
            return True  # another thread answered the challenge meanwhile: retry with its header
        if scheme.lower() == "basic" and self._credentials:
            value = "Basic " + base64.b64encode(":".join(self._credentials).encode()).decode()
        elif scheme.lower() == "bearer":
            value = "Bearer " + self._token(dict(_CHALLENGE.findall(params)))
        else:
            return False
        if value == sent:
            return False  # it was sent and refused
        with self._auth_lock:
            self._authorization[repo] = value
        return True

    def _token(self, challenge: dict[str, str]) -> str:
        realm = challenge.get("realm")
        if not realm:
            raise SourceError(f"registry {self.host} sent a Bearer challenge without a realm")
        query = {k: v for k, v in challenge.items() if k in ("service", "scope")}
        auth = self._credentials if self._credentials else None
        try:
            resp = requests.get(realm, params=query, auth=auth, timeout=TIMEOUT)
        except requests.RequestException as exc:
            raise SourceError(f"token service of {self.host} unreachable: {type(exc).__name__}") from None
        if resp.status_code != 200:
            hint = "check the credentials for this registry" if auth else "this registry needs credentials"
            raise SourceError(f"registry {self.host}: token request refused ({resp.status_code})", hint)
        body = resp.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise SourceError(f"registry {self.host}: token service answered without a token")
        return str(token)

    def _call(self, method: str, url: str, ok: tuple[int, ...], **kwargs: Any) -> requests.Response:
        resp = self._send(method, url, **kwargs)
        replayable = not hasattr(kwargs.get("data"), "__next__")  # a streamed body cannot be sent twice
        if resp.status_code == 401 and replayable and self._authorize(resp):
            resp.close()
            resp = self._send(method, url, **kwargs)
        if resp.status_code not in ok:
            if resp.status_code == 404:
                raise NotFound(f"registry {self.host}: {method} {url.split('?')[0]}: not found")
            hint = {401: "set credentials for this registry (docs/images.md, `credentials`)"}.get(resp.status_code)
            body = resp.text[:160].strip().replace("\n", " ")
            raise SourceError(f"registry {self.host}: {method} {url.split('?')[0]}: {resp.status_code} {body}", hint)
        return resp

    @staticmethod
    def _v2(repo: str, kind: str, reference: str = "") -> str:
        """``/v2/<repo>/<kind>/<reference>``, each part checked against the distribution grammar first: HTTP
        clients normalize ``..`` away, so ``a/../../x`` would reach another endpoint with this registry's
        credentials."""
        return f"/v2/{valid_name(repo)}/{kind}" + (f"/{valid_reference(reference)}" if reference else "")

    # --- reading -------------------------------------------------------------------------------------

    def manifest(self, repo: str, reference: str) -> tuple[bytes, str, str]:
        """(raw bytes, media type, digest) of a manifest; a by-digest read is checked against the digest."""
        resp = self._call("GET", self._v2(repo, "manifests", reference), (200,), headers={"Accept": ACCEPT})
        data = resp.content[: MAX_MANIFEST + 1]
        if len(data) > MAX_MANIFEST:
            raise SourceError(f"registry {self.host}: manifest {repo}@{reference} is larger than 4 MiB")
        digest = sha256_digest(data)
        if reference.startswith("sha256:") and digest != reference:
            raise IntegrityError(f"registry {self.host}: manifest {repo}@{reference} has digest {digest}")
        media_type = resp.headers.get("Content-Type", "").split(";")[0].strip()
        return data, media_type, digest

    def manifest_digest(self, repo: str, reference: str) -> str | None:
        """The digest a tag (or digest) resolves to, or None when the registry does not have it."""
        try:
            return self.manifest(repo, reference)[2]
        except NotFound:
            return None

    def blob(self, repo: str, digest: str, *, check: bool = True) -> Iterator[bytes]:
        """The blob's bytes in chunks; the whole is checked against ``digest`` at the end (IntegrityError).
        ``check=False`` leaves that check to a caller that hashes the bytes anyway (a store artifact's SHA-256:
        ``pull.Copier``), so they are hashed once, not twice."""
        resp = self._call("GET", self._v2(repo, "blobs", digest), (200,), stream=True)
        h = hashlib.sha256() if check else None
        with resp:
            for chunk in resp.iter_content(CHUNK):
                if h is not None:
                    h.update(chunk)
                yield chunk
        if h is not None:
            self.check_blob(repo, digest, "sha256:" + h.hexdigest())

    def check_blob(self, repo: str, digest: str, arrived: str) -> None:
        """IntegrityError unless the bytes that arrived for ``repo@digest`` have that digest."""
        if arrived != digest:
            raise IntegrityError(f"registry {self.host}: blob {repo}@{digest} arrived with a different digest")

    def referrers(self, repo: str, digest: str) -> list[dict[str, Any]]:
        """Descriptors of the manifests whose ``subject`` is ``digest``: the referrers API, else the tag schema."""
        try:
            resp = self._call("GET", self._v2(repo, "referrers", digest), (200,), headers={"Accept": OCI_INDEX})
            if resp.headers.get("Content-Type", "").startswith(OCI_INDEX):
                return list(resp.json().get("manifests") or [])
        except NotFound:
            pass
        try:
            data, _, _ = self.manifest(repo, referrers_tag(digest))
        except NotFound:
            return []
        return list(json.loads(data).get("manifests") or [])

    def has_blob(self, repo: str, digest: str) -> bool:
        try:
            self._call("HEAD", self._v2(repo, "blobs", digest), (200,))
        except NotFound:
            return False
        return True

    def has_manifest(self, repo: str, reference: str) -> bool:
        try:
            self._call("HEAD", self._v2(repo, "manifests", reference), (200,), headers={"Accept": ACCEPT})
        except NotFound:
            return False
        return True

    # --- writing -------------------------------------------------------------------------------------

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount: no bytes move. False when the registry opened an upload instead."""
        query = f"?mount={valid_digest(digest)}&from={valid_name(from_repo)}"
        resp = self._call("POST", self._v2(repo, "blobs/uploads/") + query, (201, 202))
        if resp.status_code == 201:
            return True
        self._call("DELETE", resp.headers["Location"], (204, 404))  # the upload it opened instead
        return False

    def push_blob(self, repo: str, digest: str, chunks: Iterable[bytes]) -> None:
        """Upload a blob: POST, one streamed PATCH (chunked transfer encoding), PUT with the digest.

        The registry checks the digest before the blob becomes visible, so a broken stream leaves nothing
        behind but an unfinished upload, which the registry discards."""
        location = self._call("POST", self._v2(repo, "blobs/uploads/"), (202,)).headers["Location"]
        headers = {"Content-Type": "application/octet-stream"}
        location = self._call("PATCH", location, (202,), data=iter(chunks), headers=headers).headers["Location"]
        sep = "&" if "?" in location else "?"
        self._call("PUT", f"{location}{sep}digest={valid_digest(digest)}", (201,), headers={"Content-Length": "0"})

    def put_manifest(self, repo: str, reference: str, data: bytes, media_type: str) -> None:
        headers = {"Content-Type": media_type}
        self._call("PUT", self._v2(repo, "manifests", reference), (201,), data=data, headers=headers)

    def delete(self, repo: str, kind: str, digest: str) -> None:
        """Delete a manifest or blob (``kind``: manifests, blobs) by digest; gone already is fine (a drill's
        wipe: registries refuse this unless deletes are enabled)."""
        self._call("DELETE", self._v2(repo, kind, valid_digest(digest)), (202, 404))
