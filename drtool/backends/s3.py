"""A store in an S3 bucket (AWS S3, MinIO, Ceph RGW, ...), under an optional key prefix: ``s3://bucket/prefix``.

Settings follow boto3's own conventions (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws/config ...),
so an operator configures drtool like any other AWS tool. What drtool fixes itself is what a backup tool
must get right whatever the environment says: path-style addressing (works with every S3 implementation),
short bounded retries and timeouts (a store that is down must fail a backup within seconds with one clear
line, not hang for minutes), and write-once objects through conditional writes.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.loaders import Loader, create_loader

from drtool.errors import DrtoolError, NotFound, ObjectExists, StoreUnavailable, UsageError

if TYPE_CHECKING:
    from botocore.client import BaseClient

_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "ExpiredToken",
        "InvalidAccessKeyId",
        "InvalidToken",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
    }
)
_CREDENTIALS_HINT = "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE and the bucket policy"
_NETWORK_HINT = "check that the S3 endpoint is up and that AWS_ENDPOINT_URL names it"
_DELETE_BATCH = 1000  # the most keys one DeleteObjects request may name
log = logging.getLogger(__name__)


@functools.cache
def _service_models() -> Loader:
    return create_loader()


def boto_session() -> boto3.session.Session:
    """A boto3 session of its own (credentials and region are read for it, as ``boto3.session.Session()``
    does) that shares the process's loaded service models: each session otherwise parses the S3 model and
    endpoint rules again, 0.06 CPU-s and several MiB per client (a backup makes one for the store and one
    per source; docs/performance.md, "The S3 path's memory")."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _service_models())
    return boto3.session.Session(botocore_session=core)


class S3Backend:
    """Objects are S3 objects under ``prefix/``; one client per backend, shared by all threads.

    boto3 clients are thread-safe but sessions are not, so the session is used once, here, to build the
    client; parallel chunk uploads then share its connection pool.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 3.0,
        read_timeout: float = 10.0,
        max_attempts: int = 3,
        max_connections: int = 32,
    ) -> None:
        self.bucket, self.prefix = _parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self._root = f"{self.prefix}/" if self.prefix else ""
        # worst case with the defaults: ~12 s for an endpoint that drops packets (3 x 3 s + backoff), ~35 s
        # for one that accepts connections but never answers (3 x 10 s; 10 MiB puts need a generous read)
        config = Config(
            # UNSIGNED-PAYLOAD: SigV4 would hash every body (0.9 CPU-s per GiB), and it adds nothing here. Every
            # object drtool writes but the plaintext config is sealed with AES-GCM under the store key, so a
            # body changed in transit fails authentication when read; and on plain http (a lab MinIO) SigV4
            # never covered response bodies anyway, so whoever can change a PUT can change the GETs too. The
            # config is protected as it is at rest (docs/threat-model.md). Headers and the URL stay signed.
            s3={"addressing_style": "path", "payload_signing_enabled": False},
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=max_connections,
            # every object is authenticated by drtool's AEAD; botocore's CRC32 costs ~1.7 s of CPU per GiB
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._timeouts = (connect_timeout, read_timeout, max_attempts)
        try:
            self._client: BaseClient = boto_session().client("s3", config=config)
        except ProfileNotFound as exc:
            raise StoreUnavailable(f"cannot open store {self.url}: {exc}", _CREDENTIALS_HINT) from exc
        self._bucket_seen = False  # set once any call proved the bucket exists

    def sync(self) -> None:
        """Nothing to do: S3 acknowledges a PUT only once the object is durable."""

    def create(self) -> None:
        """A bucket is made by its owner (with its policy and Object Lock); drtool only checks it exists."""
        with self._calling("open", "the bucket"):
            self._require_bucket()

    def endpoint(self) -> str:
        return self._client.meta.endpoint_url

    # -- the Backend contract -------------------------------------------------------------------------

    def put(self, name: str, data: bytes, *, exclusive: bool = False, write_once: bool = False) -> None:
        """Write ``data``. ``exclusive`` and ``write_once`` send a conditional write (If-None-Match: *), so S3
        refuses to replace an object; ``exclusive`` then raises ObjectExists, ``write_once`` takes the object
        that is there as written (its name is its content, or random). A bucket policy can require the
        condition of every PutObject (``s3:if-none-match``): only a lock's refresh, a plain put, replaces."""
        key = self._key(name)
        conditional = exclusive or write_once
        condition = {"IfNoneMatch": "*"} if conditional else {}
        log.debug("put s3://%s/%s (%d bytes%s)", self.bucket, key, len(data), ", exclusive" if exclusive else "")
        with self._calling("write", name):
            try:
                self._client.put_object(Bucket=self.bucket, Key=key, Body=data, **condition)
            except ClientError as exc:
                if not (conditional and _status(exc) in (409, 412)):
                    raise
                # a retried write can be refused because our own first attempt landed: that is success
                if write_once or (_retry_attempts(exc) and self._holds(key, data)):
                    return
                raise ObjectExists(f"{name} already exists in store {self.url}") from None
        self._bucket_seen = True

    def get(self, name: str) -> bytes:
        key = self._key(name)
        with self._calling("read", name):
            data = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        self._bucket_seen = True
        log.debug("got s3://%s/%s (%d bytes)", self.bucket, key, len(data))
        return data

    def get_range(self, name: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        key = self._key(name)
        with self._calling("read", name):
            resp = self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            data: bytes = resp["Body"].read()
        self._bucket_seen = True
        return data

    def get_timed(self, name: str) -> tuple[bytes, dt.datetime]:
        with self._calling("read", name):
            answer = self._client.get_object(Bucket=self.bucket, Key=self._key(name))
            data: bytes = answer["Body"].read()
        self._bucket_seen = True
        return data, answer["LastModified"].astimezone(dt.UTC)

    def list_timed(self, prefix: str = "") -> Iterator[tuple[str, dt.datetime]]:
        """Each object with when the store first received its current bytes (``received_first``), from one
        listing of versions; with plain ``LastModified`` where the credentials may not list versions."""
        try:
            first = self._first_received(prefix)
        except StoreUnavailable:  # no s3:ListBucketVersions (a write-only backup user): the current version
            first = None
        if first is not None:
            yield from first.items()
            return
        for key, obj in self._listing(prefix):
            yield key, obj["LastModified"].astimezone(dt.UTC)

    def received_first(self, name: str) -> dt.datetime | None:
        """When the store first received the bytes ``name`` holds now: the oldest version with the same
        ETag (a re-PUT of the same bytes makes a new version with a new ``LastModified``; a versioned bucket
        keeps the first, and Object Lock keeps anyone from deleting it). None where versions cannot be listed.

        ``LastModified`` of the current version is what ``get_timed`` gives; this costs a listing, so the
        repository asks only when that time makes a backup look back-dated (drtool/repo/repository.py)."""
        try:
            return (self._first_received(name) or {}).get(name)
        except StoreUnavailable:
            return None

    def _first_received(self, prefix: str) -> dict[str, dt.datetime] | None:
        full = self._root + (self._check_name(prefix) if prefix else "")
        pages = self._client.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=full)
        versions: dict[str, list[dict[str, Any]]] = {}
        current: dict[str, dict[str, Any]] = {}
        with self._calling("list versions of", f"{prefix or 'objects'}*"):
            for page in pages:
                for entry in page.get("DeleteMarkers", ()):
                    if entry.get("IsLatest"):
                        current[entry["Key"]] = {}  # deleted: its older versions are not objects
                for entry in page.get("Versions", ()):
                    versions.setdefault(entry["Key"], []).append(entry)
                    if entry.get("IsLatest"):
                        current[entry["Key"]] = entry
        out = {}
        for key, latest in current.items():
            if not latest or key.endswith("/"):
                continue
            same = [v["LastModified"] for v in versions[key] if v.get("ETag") == latest.get("ETag")]
            out[key[len(self._root) :]] = min(same).astimezone(dt.UTC)
        return out

    def exists(self, name: str) -> bool:
        return self._head(name) is not None

    def size(self, name: str) -> int:
        head = self._head(name)
        if head is None:
            raise NotFound(f"{name} not found in store {self.url}")
        return int(head["ContentLength"])

    def list(self, prefix: str = "") -> Iterator[str]:
        """Names under ``prefix`` (a plain string prefix); pages through any number of objects."""
        for name, _ in self._listing(prefix):
            yield name

    def _listing(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        full = self._root + (self._check_name(prefix) if prefix else "")
        log.debug("list s3://%s/%s*", self.bucket, full)
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full)
        with self._calling("list", f"{prefix or 'objects'}*"):
            for page in pages:
                self._bucket_seen = True
                for obj in page.get("Contents", ()):
                    key: str = obj["Key"]
                    if not key.endswith("/"):  # folder markers made by S3 consoles are not objects
                        yield key[len(self._root) :], obj

    def delete(self, name: str) -> None:
        """Delete ``name``; S3 answers a delete of a missing key with success, which keeps this idempotent."""
        key = self._key(name)
        log.debug("delete s3://%s/%s", self.bucket, key)
        with self._calling("delete", name):
            self._client.delete_object(Bucket=self.bucket, Key=key)

    # -- beyond the contract --------------------------------------------------------------------------

    def delete_many(self, names: list[str]) -> None:
        """Delete ``names`` with DeleteObjects, 1,000 keys a request: a prune of a million chunks is minutes,
        not the hours one DELETE per chunk takes. A key S3 refuses to delete is a store error naming it."""
        for start in range(0, len(names), _DELETE_BATCH):
            batch = names[start : start + _DELETE_BATCH]
            log.debug("delete %d objects from s3://%s/%s", len(batch), self.bucket, self._root)
            with self._calling("delete", f"{len(batch)} objects"):
                answer = self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": self._key(n)} for n in batch], "Quiet": True},
                )
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise StoreUnavailable(
                    f"store refused to delete {len(errors)} object(s), e.g. {first.get('Key')}: {first.get('Code')}",
                    "check the credentials' s3:DeleteObject permission and the bucket's Object Lock settings",
                )

    def lock_status(self, name: str, now: dt.datetime) -> str | None:
        """Why ``name`` cannot be deleted under S3 Object Lock ("legal hold", "compliance retention until
        ..."), or None when nothing holds it (or it is gone)."""
        head = self._head(name)
        if head is None:
            return None
        if head.get("ObjectLockLegalHoldStatus") == "ON":
            return "legal hold"
        until = head.get("ObjectLockRetainUntilDate")
        if until is not None and until > now:
            return f"{str(head.get('ObjectLockMode', '')).lower()} retention until {until:%Y-%m-%dT%H:%M:%SZ}"
        return None

    def object_lock_enabled(self) -> bool:
        """Whether the bucket has S3 Object Lock (it can only be turned on when the bucket is created)."""
        with self._calling("read the Object Lock configuration of", "the bucket"):
            try:
                config = self._client.get_object_lock_configuration(Bucket=self.bucket)
            except ClientError as exc:
                if _code(exc) == "ObjectLockConfigurationNotFoundError":
                    return False
                raise
        return config.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"

    # -- helpers --------------------------------------------------------------------------------------

    @staticmethod
    def _check_name(name: str) -> str:
        """Same rule as the local backend, so a store can be copied between the two unchanged."""
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"invalid object name {name!r}")
        return name

    def _key(self, name: str) -> str:
        return self._root + self._check_name(name)

    def _head(self, name: str) -> dict[str, Any] | None:
        """HEAD the object; None if missing. A HEAD 404 carries no error code, so the bucket is checked once."""
        key = self._key(name)
        with self._calling("read", name):
            try:
                head = self._client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _status(exc) != 404:
                    raise
                self._require_bucket()
                return None
        self._bucket_seen = True
        return head

    def _require_bucket(self) -> None:
        if self._bucket_seen:
            return
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _status(exc) == 404:
                raise self._no_bucket() from None
            raise
        self._bucket_seen = True

    def _holds(self, key: str, data: bytes) -> bool:
        try:
            return self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read() == data
        except ClientError:
            return False

    def _no_bucket(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"bucket {self.bucket} does not exist at {self.endpoint()} (store {self.url})",
            f"create it first (e.g. `aws s3 mb s3://{self.bucket}`), or fix the bucket name in the store URL",
        )

    @contextmanager
    def _calling(self, action: str, name: str) -> Iterator[None]:
        """Turn botocore's exceptions into drtool's typed one-line errors."""
        try:
            yield
        except ClientError as exc:
            raise self._client_error(exc, action, name) from exc
        except BotoCoreError as exc:
            raise self._transport_error(exc, action, name) from exc

    def _client_error(self, exc: ClientError, action: str, name: str) -> DrtoolError:
        code = _code(exc)
        if code == "NoSuchKey":
            return NotFound(f"{name} not found in store {self.url}")
        if code in ("404", "NotFound"):  # a 404 without an S3 error body: some web server, not S3
            return StoreUnavailable(
                f"{self.endpoint()} answered a bare HTTP 404 to {action} {name} (store {self.url})",
                "that does not look like an S3 endpoint; check AWS_ENDPOINT_URL",
            )
        if code == "NoSuchBucket":
            return self._no_bucket()
        if code in _AUTH_CODES or _status(exc) == 403:
            return StoreUnavailable(
                f"access to store {self.url} at {self.endpoint()} denied ({code}) trying to {action} {name}",
                _CREDENTIALS_HINT,
            )
        message = " ".join(str(exc.response.get("Error", {}).get("Message", "")).split())
        return StoreUnavailable(
            f"cannot {action} {name} in store {self.url} at {self.endpoint()}: {code} {message}",
            "the S3 server refused the request; retry later or check its logs",
        )

    def _transport_error(self, exc: BotoCoreError, action: str, name: str) -> DrtoolError:
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return StoreUnavailable(f"no usable credentials for store {self.url}: {exc}", _CREDENTIALS_HINT)
        if isinstance(exc, BotoConnectionError | HTTPClientError):
            return StoreUnavailable(
                f"cannot reach store {self.url} at {self.endpoint()}: {self._reason(exc)}", _NETWORK_HINT
            )
        return StoreUnavailable(f"cannot {action} {name} in store {self.url} at {self.endpoint()}: {exc}")

    def _reason(self, exc: BotoCoreError) -> str:
        """The cause of a network failure in a few words ("Connection refused"), not urllib3's repr soup."""
        connect, read, attempts = self._timeouts
        if isinstance(exc, ConnectTimeoutError):
            return f"no connection within {connect:g}s ({attempts} attempts)"
        if isinstance(exc, ReadTimeoutError):
            return f"no response within {read:g}s ({attempts} attempts)"
        pending: list[BaseException | None] = [exc]
        seen: set[int] = set()
        while pending:
            cause = pending.pop()
            if cause is None or id(cause) in seen:
                continue
            seen.add(id(cause))
            if isinstance(cause, OSError) and cause.strerror:
                return cause.strerror
            pending += [getattr(cause, "kwargs", {}).get("error"), cause.__cause__, cause.__context__]
        return " ".join(str(exc).split())


def _parse_url(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise UsageError(f"invalid S3 store URL {url!r}", "use s3://bucket or s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _retry_attempts(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
