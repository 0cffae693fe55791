"""Where checkpoints live: an S3 bucket/prefix or a directory, behind one small interface.

Both kinds list objects with what torn-read detection and incremental backup need (size, ETag, mtime),
read whole objects or byte ranges, and write objects so that a reader never sees a half-written one (S3:
a PUT or completed multipart upload; a directory: a temporary name renamed into place). Credentials are
never settings: boto3 finds them in the usual places (AWS_* variables, profiles), or they come from an
AWS-style credentials file the ``credentials_file`` setting names (a mounted Secret, a lab MinIO's keys).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from drtool.errors import SourceError, UsageError
from drtool.plugin.toolkit import paths
from drtool.plugin.toolkit.s3 import file_credentials

from .upload import PartUploader

if TYPE_CHECKING:
    from botocore.client import BaseClient

    from .ranged import RangePool

IO_BLOCK = 1 << 20  # read size: per-call overhead is small next to 1 MiB, and memory stays bounded per stream
SHA_META = "drtool-sha256"  # S3 user metadata written on restore, so re-runs and verify can skip a re-read
PARTIAL = ".drtool-partial-"  # prefix of a file being written into a directory target


@dataclasses.dataclass(frozen=True)
class ObjectStat:
    """One object as listed: ``key`` is relative to the location's root, '/'-separated."""

    key: str
    size: int
    etag: str = ""  # S3 ETag without quotes; "" for files
    mtime: float = 0.0
    version: str = ""  # a file's inode and ctime: changes when the file is replaced or rewritten

    @property
    def fingerprint(self) -> str:
        """Changes whenever the object's content may have changed (used for torn reads and reuse)."""
        return f"{self.size}:{self.etag}:{self.mtime!r}:{self.version}"


class Location(Protocol):
    url: str

    def endpoint(self) -> str: ...

    def list(self, prefix: str = "") -> list[ObjectStat]: ...

    def read_range(self, key: str, start: int, length: int) -> bytes: ...

    def open(self, key: str, expect: ObjectStat) -> contextlib.AbstractContextManager[tuple[IO[bytes], dict[str, str]]]:
        """A stream of the object and the source's own checksums of it (algorithm -> value)."""
        ...

    def stat(self, key: str) -> ObjectStat | None: ...

    def put(self, key: str, stream: IO[bytes], size: int, sha256: str) -> None: ...

    def stored_sha256(self, key: str) -> str | None:
        """The SHA-256 drtool recorded when it wrote ``key`` (S3), else None."""
        ...

    def delete(self, key: str) -> None: ...


class Changed(Exception):
    """The object changed between listing and reading (not a DrtoolError: the caller retries)."""


def _join(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


class S3Location:
    def __init__(
        self,
        url: str,
        endpoint_url: str | None = None,
        credentials_file: str | None = None,
        workers: int = 16,
        ranges: RangePool | None = None,
    ) -> None:
        rest = url.removeprefix("s3://")
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise UsageError(f"checkpoints: {url!r} names no bucket", "write s3://BUCKET/PREFIX")
        self.prefix = prefix.strip("/")
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self._client = s3_client(endpoint_url, credentials_file, workers)
        self._ranges = ranges  # large objects are read in parallel ranges when set (a backup's reads)
        self._workers = workers
        self._parts: PartUploader | None = None  # a restore's writes (module upload)
        self._lock = threading.Lock()

    def endpoint(self) -> str:
        return str(self._client.meta.endpoint_url)

    @contextlib.contextmanager
    def _calling(self, action: str) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            if code in ("PreconditionFailed", "412"):
                raise Changed(action) from None
            raise SourceError(
                f"checkpoints: cannot {action} at {self.endpoint()}: {code} {err.get('Message', '')}".strip(),
                "check the bucket, its policy and the credentials (AWS_* variables)",
            ) from None
        except BotoCoreError as exc:
            raise SourceError(
                f"checkpoints: cannot {action} at {self.endpoint()}: {str(exc).splitlines()[0]}",
                "check that the S3 endpoint is up (endpoint_url / AWS_ENDPOINT_URL)",
            ) from None

    def list(self, prefix: str = "") -> list[ObjectStat]:
        root = "/".join(p for p in (self.prefix, prefix) if p)
        root = f"{root}/" if root else ""
        out = []
        with self._calling(f"list {self.url}"):
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=root):
                for obj in page.get("Contents", []):
                    key = obj["Key"][len(self._root_prefix()) :]
                    if key and not key.endswith("/"):
                        out.append(
                            ObjectStat(key, obj["Size"], obj["ETag"].strip('"'), obj["LastModified"].timestamp())
                        )
        return out

    def _root_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def stat(self, key: str) -> ObjectStat | None:
        from botocore.exceptions import ClientError

        try:
            head = self._client.head_object(Bucket=self.bucket, Key=_join(self.prefix, key))
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                return None
            with self._calling(f"stat {key}"):
                raise
        return ObjectStat(key, head["ContentLength"], head["ETag"].strip('"'), head["LastModified"].timestamp())

    def stored_sha256(self, key: str) -> str | None:
        with self._calling(f"stat {key}"):
            head = self._client.head_object(Bucket=self.bucket, Key=_join(self.prefix, key))
        return head.get("Metadata", {}).get(SHA_META)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return b"".join(self.read_blocks(key, start, length))

    def read_blocks(self, key: str, start: int, length: int, etag: str = "") -> list[bytes]:
        """Bytes ``start`` to ``start + length`` of ``key`` (fewer at its end) in blocks of at most IO_BLOCK as
        they came off the connection, so a reader is handed them without copying; of the version with
        ``etag`` only, when given (another one raises ``Changed``)."""
        if length <= 0:
            return []
        pinned = {"IfMatch": f'"{etag}"'} if etag else {}
        with self._calling(f"read {key}"):
            body = self._client.get_object(
                Bucket=self.bucket, Key=_join(self.prefix, key), Range=f"bytes={start}-{start + length - 1}", **pinned
            )["Body"]
            return list(iter(functools.partial(body.read, IO_BLOCK), b""))

    @contextlib.contextmanager
    def open(self, key: str, expect: ObjectStat) -> Iterator[tuple[IO[bytes], dict[str, str]]]:
        # IfMatch: an object replaced since it was listed fails with 412 instead of mixing two versions
        params = {"Bucket": self.bucket, "Key": _join(self.prefix, key), "IfMatch": f'"{expect.etag}"'}
        ranges = self._ranges if self._ranges is not None and self._ranges.applies(expect.size) else None
        with self._calling(f"read {key}"):
            # ranged: the whole-object checksums come from a HEAD (a ranged GET reports none; MinIO's HEAD
            # reports what its GET does)
            resp = (self._client.get_object if ranges is None else self._client.head_object)(
                **params, ChecksumMode="ENABLED"
            )
        sums = _source_sums(resp, expect)
        stream = (
            resp["Body"] if ranges is None else ranges.stream(functools.partial(self._range, key, expect), expect.size)
        )
        try:
            with self._calling(f"read {key}"):
                yield stream, sums
        finally:
            stream.close()

    def _range(self, key: str, expect: ObjectStat, start: int, length: int) -> list[bytes]:
        """One range of the listed version of ``key`` (a replaced or shortened object raises ``Changed``)."""
        blocks = self.read_blocks(key, start, length, etag=expect.etag)
        if sum(map(len, blocks)) != length:
            raise Changed(f"read {key}")
        return blocks

    def put(self, key: str, stream: IO[bytes], size: int, sha256: str) -> None:
        with self._calling(f"write {key}"):
            self._uploader().upload(_join(self.prefix, key), stream, size, {SHA_META: sha256})

    def _uploader(self) -> PartUploader:
        """Made on the first write: a backup's source location never writes."""
        with self._lock:
            if self._parts is None:
                self._parts = PartUploader(self._client, self.bucket, 2 * self._workers)
            return self._parts

    def delete(self, key: str) -> None:
        with self._calling(f"delete {key}"):
            self._client.delete_object(Bucket=self.bucket, Key=_join(self.prefix, key))


def _source_sums(resp: Mapping[str, Any], expect: ObjectStat) -> dict[str, str]:
    """The whole-object checksums a GET or HEAD with ``ChecksumMode=ENABLED`` reported (algorithm -> value),
    and a single-part upload's ETag as its MD5."""
    sums = {k.removeprefix("Checksum").lower(): v for k, v in resp.items() if k.startswith("Checksum") and v}
    sums.pop("type", None)
    if resp.get("ChecksumType", "FULL_OBJECT") == "COMPOSITE":
        sums = {}  # a checksum of part checksums: not comparable with a whole-object digest
    if expect.etag and "-" not in expect.etag and len(expect.etag) == 32:
        sums["md5"] = expect.etag  # a single-part upload's ETag is the MD5 of its content
    return sums


def s3_client(endpoint_url: str | None, credentials_file: str | None, workers: int = 16) -> BaseClient:
    """A boto3 S3 client for checkpoint locations, with botocore's own checksums off: drtool checks the
    source's checksums and its SHA-256 itself.

    Over https the bodies of uploads are not hashed for SigV4 (``payload_signing_enabled``): TLS protects
    them in transit, and a restore's verification checks what landed. botocore would hash every uploaded
    byte otherwise (SHA-256, about 0.8 CPU-s per GiB here), since it skips the hash on https only when a
    checksum header goes along, and these uploads send none. Over plain http the hash is kept: it is then
    the only thing that makes S3 refuse a body changed on the way. The endpoint is the resolved one (an
    AWS_ENDPOINT_URL or a profile's may name it): a guess from ``endpoint_url`` that turns out wrong costs a
    second client."""
    from drtool.backends.s3 import boto_session

    kwargs: dict[str, Any] = {"endpoint_url": endpoint_url} if endpoint_url else {}
    if credentials_file:
        kwargs.update(file_credentials(credentials_file, None, "credentials_file"))
    named = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    guess = (named or "https:").startswith("https:")  # no endpoint named: AWS's own, over https
    try:
        client = boto_session().client("s3", config=_config(workers, over_tls=guess), **kwargs)
        resolved = client.meta.endpoint_url.startswith("https:")
        if resolved != guess:
            client = boto_session().client("s3", config=_config(workers, over_tls=resolved), **kwargs)
    except Exception as exc:  # boto3 raises several unrelated types for a bad profile or region
        raise SourceError(f"checkpoints: cannot set up an S3 client: {exc}", "check AWS_* settings") from None
    no_empty_continue(client)
    return client


def _config(workers: int, *, over_tls: bool) -> Any:
    from botocore.config import Config

    return Config(
        s3={"addressing_style": "path", "payload_signing_enabled": not over_tls},
        retries={"mode": "standard", "total_max_attempts": 3},
        connect_timeout=3,
        read_timeout=30,
        max_pool_connections=max(10, 2 * workers),
        # drtool checks the source's own checksums and its own SHA-256 itself; botocore's CRC costs CPU
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )


def no_empty_continue(client: BaseClient) -> None:
    """No ``Expect: 100-continue`` on PUTs: botocore sends it even for an empty body (a ``_SUCCESS``
    marker), and MinIO's reply then leaves a stale response on the pooled connection, so the next request
    on it waits for the whole read timeout (30 s here) before a retry."""
    from botocore.handlers import add_expect_header

    client.meta.events.unregister("before-call.s3", add_expect_header)


class DirLocation:
    """A directory (a mounted volume). Files being written by drtool (``.drtool-partial-*``) are not listed."""

    def __init__(self, path: str) -> None:
        self.root = Path(path).expanduser()
        self.url = str(self.root)

    def endpoint(self) -> str:
        return ""

    def _path(self, key: str) -> Path:
        return paths.under(self.root, key, "checkpoints: object key")

    @staticmethod
    def _stat_of(key: str, st: os.stat_result) -> ObjectStat:
        return ObjectStat(key, st.st_size, "", st.st_mtime_ns / 1e9, f"{st.st_ino}:{st.st_ctime_ns}")

    def list(self, prefix: str = "") -> list[ObjectStat]:
        base = self._path(prefix.strip("/")) if prefix.strip("/") else self.root
        if not base.is_dir():
            if not prefix:
                raise SourceError(f"checkpoints: {base} is not a directory", "check the source path")
            return []
        out = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for fname in sorted(filenames):
                full = Path(dirpath) / fname
                if fname.startswith(PARTIAL) or full.is_symlink():
                    continue
                with contextlib.suppress(FileNotFoundError):  # deleted while we walked: not part of anything
                    out.append(self._stat_of(full.relative_to(self.root).as_posix(), full.stat()))
        return out

    def stat(self, key: str) -> ObjectStat | None:
        try:
            return self._stat_of(key, self._path(key).stat())
        except FileNotFoundError:
            return None

    def stored_sha256(self, key: str) -> str | None:
        return None

    def read_range(self, key: str, start: int, length: int) -> bytes:
        with self._guard(f"read {key}"), open(self._path(key), "rb") as f:
            f.seek(start)
            return f.read(length)

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except FileNotFoundError:
            raise Changed(action) from None
        except OSError as exc:
            raise SourceError(f"checkpoints: cannot {action} under {self.root}: {exc.strerror}") from None

    @contextlib.contextmanager
    def open(self, key: str, expect: ObjectStat) -> Iterator[tuple[IO[bytes], dict[str, str]]]:
        with self._guard(f"read {key}"), open(self._path(key), "rb") as f:
            if self._stat_of(key, os.fstat(f.fileno())).fingerprint != expect.fingerprint:
                raise Changed(key)
            yield f, {}

    def put(self, key: str, stream: IO[bytes], size: int, sha256: str) -> None:
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(PARTIAL + dest.name)
        try:
            with open(tmp, "wb") as f:
                while block := stream.read(IO_BLOCK):
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except OSError as exc:
            raise SourceError(f"checkpoints: cannot write {dest}: {exc.strerror}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()


def open_location(settings: dict[str, Any], workers: int = 16, ranges: RangePool | None = None) -> Location:
    """A location from ``url: s3://...`` or ``path: DIR`` (``url`` may also be a plain path); ``ranges``:
    S3 objects at or above its threshold are read in parallel ranges."""
    url = str(settings.get("url") or "")
    path = settings.get("path")
    if url.startswith("s3://"):
        return S3Location(url, settings.get("endpoint_url"), settings.get("credentials_file"), workers, ranges)
    if path or url:
        return DirLocation(str(path or url))
    raise UsageError("checkpoints: a location needs `url: s3://BUCKET/PREFIX` or `path: DIR`")


def hash_stream(read: Callable[[int], bytes]) -> str:
    """SHA-256 of a stream read in IO_BLOCK pieces."""
    sha = hashlib.sha256()
    while block := read(IO_BLOCK):
        sha.update(block)
    return sha.hexdigest()
