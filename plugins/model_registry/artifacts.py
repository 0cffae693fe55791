"""Where a model version's files live, read and written as streams.

A version's ``source`` is resolved by the server (``model-versions/get-download-uri``, which also resolves
``runs:/`` and ``models:/``) to one of two kinds of location:
- ``mlflow-artifacts:/PATH``: behind the tracking server's artifact proxy (``--serve-artifacts``), read over
  its HTTP API, so a backup needs no object-store credentials;
- ``s3://BUCKET/KEY``: read (and, on restore, written) with boto3; the endpoint is the ``s3_endpoint``
  setting, else MLFLOW_S3_ENDPOINT_URL / AWS_ENDPOINT_URL; credentials come from an AWS-style credentials
  file (``s3_credentials_file``), else boto3's own chain (AWS_* variables, ``s3_profile``) — never inline.
Files are streamed: nothing is held whole in memory or staged on disk.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlparse

from drtool.errors import IntegrityError, SourceError, UsageError
from drtool.plugin.toolkit.s3 import file_credentials

from .client import ARTIFACTS_API, MlflowClient

if TYPE_CHECKING:
    from botocore.client import BaseClient

SHA256_META = "sha256"  # S3 user metadata drtool writes with each restored file: a re-run skips equal files


@dataclasses.dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the location
    size: int


class Location(Protocol):
    uri: str

    def files(self) -> Iterator[FileEntry]: ...

    def open(self, path: str) -> IO[bytes]: ...


@functools.cache
def s3_client(endpoint: str | None, credentials_file: str | None = None, profile: str | None = None) -> BaseClient:
    """A boto3 S3 client for ``endpoint`` (path-style, as MinIO and most on-premise stores want), made once:
    building one costs a tenth of a second, and boto3 clients are thread-safe.

    Credentials: from ``credentials_file`` when given (so one process can hold a source's and a target's
    keys), else boto3's own chain with ``profile`` (AWS_* variables, ~/.aws). Never from argv."""
    import boto3
    from botocore.config import Config

    url = endpoint or os.environ.get("MLFLOW_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL") or None
    config = Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "total_max_attempts": 3})
    keys = file_credentials(credentials_file, profile, "s3_credentials_file") if credentials_file else {}
    session = boto3.session.Session(profile_name=profile if profile and not credentials_file else None)
    return session.client("s3", endpoint_url=url, config=config, **keys)


def split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise UsageError(f"{uri!r} is not an s3://BUCKET/PREFIX URI", "use s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


@dataclasses.dataclass(frozen=True)
class S3Settings:
    """``s3_endpoint``, ``s3_credentials_file`` and ``s3_profile`` of a source or target mapping."""

    endpoint: str | None = None
    credentials_file: str | None = None
    profile: str | None = None

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> S3Settings:
        return cls(m.get("s3_endpoint") or None, m.get("s3_credentials_file") or None, m.get("s3_profile") or None)

    def client(self) -> BaseClient:
        return s3_client(self.endpoint, self.credentials_file, self.profile)


class ProxyLocation:
    """A folder behind the MLflow server's artifact proxy."""

    def __init__(self, client: MlflowClient, uri: str) -> None:
        self.client = client
        self.uri = uri
        self.root = urlparse(uri).path.strip("/")

    def files(self) -> Iterator[FileEntry]:
        pending = [""]
        while pending:
            rel = pending.pop()
            path = f"{self.root}/{rel}".rstrip("/")
            listing = self.client.request("GET", ARTIFACTS_API, params={"path": path}).json()
            for f in listing.get("files") or []:
                child = f"{rel}/{f['path'].rsplit('/', 1)[-1]}".lstrip("/")
                if f.get("is_dir"):
                    pending.append(child)
                else:
                    yield FileEntry(child, int(f.get("file_size") or 0))

    def open(self, path: str) -> IO[bytes]:
        resp = self.client.request("GET", f"{ARTIFACTS_API}/{quote(f'{self.root}/{path}')}", stream=True)
        resp.raw.decode_content = True
        return resp.raw


class S3Location:
    """A prefix (or a single object) in a bucket."""

    def __init__(self, s3: BaseClient, uri: str) -> None:
        self.s3 = s3
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = split_s3(uri)

    def _calling(self, what: str) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        return _Translate((BotoCoreError, ClientError), f"{what} {self.uri} at {self.s3.meta.endpoint_url}")

    def files(self) -> Iterator[FileEntry]:
        with self._calling("listing"):
            found = False
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + "/"):
                for obj in page.get("Contents") or []:
                    found = True
                    yield FileEntry(obj["Key"][len(self.prefix) + 1 :], int(obj["Size"]))
            if not found and self.prefix:  # a source naming one file, not a folder
                head = self.head(None)
                if head is not None:
                    yield FileEntry("", int(head["ContentLength"]))

    def key(self, path: str | None) -> str:
        return f"{self.prefix}/{path}" if path else self.prefix

    def head(self, path: str | None) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return self.s3.head_object(Bucket=self.bucket, Key=self.key(path))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def open(self, path: str) -> IO[bytes]:
        with self._calling("reading"):
            return self.s3.get_object(Bucket=self.bucket, Key=self.key(path))["Body"]

    def holds(self, path: str, sha256: str, size: int) -> bool:
        """Whether ``path`` is already there with this content (as drtool wrote it before)."""
        with self._calling("checking"):
            head = self.head(path)
        return (
            head is not None and head["ContentLength"] == size and head.get("Metadata", {}).get(SHA256_META) == sha256
        )

    def put(self, path: str, stream: IO[bytes], sha256: str, size: int) -> None:
        """Upload ``stream`` (multipart for large files), checking it hashes to ``sha256``; a mismatch deletes it."""
        hashed = HashingReader(stream)
        with self._calling("writing"):
            self.s3.upload_fileobj(hashed, self.bucket, self.key(path), ExtraArgs={"Metadata": {SHA256_META: sha256}})
            if hashed.hexdigest() != sha256 or hashed.count != size:
                self.s3.delete_object(Bucket=self.bucket, Key=self.key(path))
                raise IntegrityError(f"file {path} of {self.uri} does not match its backup checksum")


class _Translate:
    """Turns boto errors inside a ``with`` block into one-line ``SourceError``s."""

    def __init__(self, kinds: tuple[type[BaseException], ...], what: str) -> None:
        self.kinds, self.what = kinds, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> bool:
        if exc is not None and isinstance(exc, self.kinds):
            detail = str(exc).splitlines()[0][:200]
            raise SourceError(f"{self.what} failed: {detail}", "check the endpoint, bucket and AWS_* credentials")
        return False


class HashingReader:
    """A read-only stream that hashes (SHA-256) and counts what passes through it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.sha = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self.sha.update(data)
        self.count += len(data)
        return data

    def hexdigest(self) -> str:
        return self.sha.hexdigest()


def open_location(client: MlflowClient, uri: str, s3: S3Settings) -> Location:
    """The location a resolved artifact URI names (``mlflow-artifacts:`` or ``s3:``)."""
    scheme = urlparse(uri).scheme
    if scheme == "mlflow-artifacts":
        return ProxyLocation(client, uri)
    if scheme == "s3":
        return S3Location(s3.client(), uri)
    raise SourceError(
        f"artifact location {uri} is not supported (only mlflow-artifacts: and s3:)",
        "exclude the model with the `models` setting, or move its artifacts to S3",
    )
