"""One conformance suite for every store backend (the contract in drtool/backends/backend.py), plus S3 failures.

The same tests run against a local directory and a real MinIO, because the repository layer above must not
be able to tell them apart; the S3-only tests check that a misconfigured or unreachable store fails fast
with one clear line instead of a botocore traceback.
"""

from __future__ import annotations

import datetime as dt
import http.server
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from drtool_lab.components.minio import MinioServer

from drtool.backends import Backend, open_backend
from drtool.backends.s3 import S3Backend
from drtool.errors import NotFound, ObjectExists, StoreUnavailable, UsageError
from drtool.servers import process
from tests.fixtures.noise import noise


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.minio)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        root = tmp_path / "store"
        root.mkdir()
        return open_backend(str(root))
    return open_backend(request.getfixturevalue("s3_store_url"))


def _put_many(backend: Backend, names: list[str], data: bytes = b"x") -> None:
    """Write in parallel: faster on S3, and it exercises one backend object shared by many threads."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda n: backend.put(n, data), names))


# -- the contract ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 5 * 1024 * 1024 + 3])
def test_put_then_get_returns_the_same_bytes(backend: Backend, size: int) -> None:
    data = noise(size)
    backend.put("obj", data)
    assert backend.get("obj") == data
    assert backend.size("obj") == size
    assert backend.exists("obj")


def test_get_range_reads_a_slice_and_stops_at_the_end(backend: Backend) -> None:
    data = noise(3 * 1024 * 1024 + 5)
    backend.put("pack", data)
    assert backend.get_range("pack", 0, 10) == data[:10]
    assert backend.get_range("pack", 1024 * 1024, 2 * 1024 * 1024) == data[1024 * 1024 : 3 * 1024 * 1024]
    assert backend.get_range("pack", len(data) - 4, 100) == data[-4:]  # a range past the end is cut short
    with pytest.raises(NotFound):
        backend.get_range("missing", 0, 10)


def test_put_takes_a_bytearray(backend: Backend) -> None:
    """Packs are assembled in a bytearray and uploaded without a copy."""
    data = bytearray(noise(1024 * 1024))
    backend.put("pack", data)
    assert backend.get("pack") == data


def test_plain_put_replaces(backend: Backend) -> None:
    backend.put("obj", b"old")
    backend.put("obj", b"new")
    assert backend.get("obj") == b"new"


def test_exclusive_put_creates_a_new_object(backend: Backend) -> None:
    backend.put("obj", b"data", exclusive=True)
    assert backend.get("obj") == b"data"


def test_exclusive_put_refuses_an_existing_object_and_keeps_it(backend: Backend) -> None:
    backend.put("manifest", b"original")
    with pytest.raises(ObjectExists):
        backend.put("manifest", b"impostor", exclusive=True)
    assert backend.get("manifest") == b"original"


def test_racing_exclusive_puts_have_exactly_one_winner(backend: Backend) -> None:
    writers = 8
    barrier = threading.Barrier(writers)

    def attempt(i: int) -> bytes | None:
        barrier.wait()
        try:
            backend.put("contested", b"writer-%d" % i, exclusive=True)
        except ObjectExists:
            return None
        return b"writer-%d" % i

    with ThreadPoolExecutor(max_workers=writers) as pool:
        winners = [w for w in pool.map(attempt, range(writers)) if w is not None]
    assert len(winners) == 1
    assert backend.get("contested") == winners[0]


@pytest.mark.parametrize("operation", [lambda b: b.get("missing"), lambda b: b.size("missing")])
def test_reading_a_missing_object_raises_not_found(backend: Backend, operation: Callable[[Backend], object]) -> None:
    with pytest.raises(NotFound):
        operation(backend)
    assert not backend.exists("missing")


def test_list_by_folder_prefix(backend: Backend) -> None:
    _put_many(backend, ["a/1", "a/2", "ab", "abc/x", "b/1"])
    assert sorted(backend.list()) == ["a/1", "a/2", "ab", "abc/x", "b/1"]
    assert sorted(backend.list("a/")) == ["a/1", "a/2"]
    assert sorted(backend.list("b")) == ["b/1"]
    assert list(backend.list("zz/")) == []


def test_list_by_string_prefix_spans_folders(backend: Backend) -> None:
    _put_many(backend, ["a/1", "a/2", "ab", "abc/x", "b/1"])
    assert sorted(backend.list("a")) == ["a/1", "a/2", "ab", "abc/x"]


def test_list_returns_every_object_past_one_page(backend: Backend) -> None:
    names = [f"many/{i:05d}" for i in range(1100)]  # S3 pages hold at most 1000 keys
    _put_many(backend, [*names, "other"])
    assert sorted(backend.list("many/")) == names


def test_write_once_put_keeps_what_is_there(backend: Backend) -> None:
    """Chunks and packs: created if absent, an existing object counts as written and is never replaced."""
    backend.put("packs/ab/x", b"first", write_once=True)
    backend.put("packs/ab/x", b"second", write_once=True)
    assert backend.get("packs/ab/x") == b"first"


def test_server_times_come_with_reads_and_listings(backend: Backend) -> None:
    """When the store received an object (drtool/repo/times.py checks backup times against it)."""
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    backend.put("manifests/a", b"1", exclusive=True)
    backend.put("manifests/b", b"2", exclusive=True)
    data, stored = backend.get_timed("manifests/a")
    listed = dict(backend.list_timed("manifests/"))
    after = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    assert data == b"1" and before <= stored <= after
    assert sorted(listed) == ["manifests/a", "manifests/b"] and all(before <= t <= after for t in listed.values())
    assert abs(listed["manifests/a"] - stored) < dt.timedelta(seconds=2)
    with pytest.raises(NotFound):
        backend.get_timed("manifests/none")


def test_delete_is_idempotent(backend: Backend) -> None:
    backend.put("obj", b"data")
    backend.delete("obj")
    backend.delete("obj")
    backend.delete("never-existed")
    assert not backend.exists("obj")
    with pytest.raises(NotFound):
        backend.get("obj")


def test_names_with_slashes_are_nested_paths(backend: Backend) -> None:
    backend.put("backups/2026/11/manifest.json", b"{}")
    backend.put("backups/2026/12/manifest.json", b"[]")
    assert backend.get("backups/2026/11/manifest.json") == b"{}"
    assert sorted(backend.list("backups/2026/")) == ["backups/2026/11/manifest.json", "backups/2026/12/manifest.json"]


@pytest.mark.parametrize("name", ["/absolute", "../escape", "a/../../b"])
def test_names_that_could_escape_the_store_are_refused(backend: Backend, name: str) -> None:
    with pytest.raises(ValueError):
        backend.put(name, b"x")


@pytest.mark.minio
def test_s3_stores_under_different_prefixes_of_one_bucket_are_separate(s3_store_url: str) -> None:
    bucket_url = s3_store_url.rsplit("/", 1)[0]
    mine, other, whole = S3Backend(s3_store_url), S3Backend(f"{bucket_url}/other/"), S3Backend(bucket_url)
    mine.put("x", b"1")
    other.put("y", b"2")
    assert list(mine.list()) == ["x"]
    assert list(other.list()) == ["y"]
    assert sorted(whole.list()) == ["other/y", "prefix/x"]
    assert other.url == f"{bucket_url}/other"


# -- S3 failures --------------------------------------------------------------------------------------


def _assert_one_line(exc: StoreUnavailable) -> None:
    assert "\n" not in exc.one_line()
    assert exc.hint


@pytest.fixture
def dead_endpoint(monkeypatch: pytest.MonkeyPatch) -> str:
    """AWS_* settings naming a loopback port nothing listens on."""
    endpoint = f"http://127.0.0.1:{process.free_port()}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "lab",
        "AWS_SECRET_ACCESS_KEY": "lab-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return endpoint


@pytest.mark.parametrize(
    "operation",
    [
        lambda b: b.get("x"),
        lambda b: b.put("x", b"1", exclusive=True),
        lambda b: list(b.list()),
        lambda b: b.exists("x"),
    ],
    ids=["get", "put", "list", "exists"],
)
def test_s3_unreachable_endpoint_fails_fast_with_one_line(
    dead_endpoint: str, operation: Callable[[S3Backend], object]
) -> None:
    backend = S3Backend("s3://bucket/prefix")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        operation(backend)
    assert time.monotonic() - started < 20
    assert caught.value.message == f"cannot reach store s3://bucket/prefix at {dead_endpoint}: Connection refused"
    _assert_one_line(caught.value)


@pytest.fixture
def silent_endpoint(dead_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A loopback port that accepts connections and never answers (a hung server)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        yield endpoint


def test_s3_hung_endpoint_times_out_with_one_line(silent_endpoint: str) -> None:
    backend = S3Backend("s3://bucket/prefix", read_timeout=0.5, max_attempts=2)
    with pytest.raises(StoreUnavailable) as caught:
        backend.get("x")
    assert caught.value.message == (
        f"cannot reach store s3://bucket/prefix at {silent_endpoint}: no response within 0.5s (2 attempts)"
    )
    _assert_one_line(caught.value)


@pytest.fixture
def not_s3_endpoint(dead_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real web server that answers every request with an empty 404, as a mistyped endpoint might."""

    class NotFoundHandler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_PUT = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFoundHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


def test_s3_endpoint_that_is_not_s3_is_not_mistaken_for_an_empty_store(not_s3_endpoint: str) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        S3Backend("s3://bucket/prefix").get("x")
    assert "bare HTTP 404" in caught.value.message
    _assert_one_line(caught.value)


@pytest.mark.minio
@pytest.mark.parametrize(
    "operation",
    [
        lambda b: b.get("x"),
        lambda b: b.put("x", b"1"),
        lambda b: list(b.list()),
        lambda b: b.exists("x"),
        lambda b: b.size("x"),
        lambda b: b.delete("x"),
    ],
    ids=["get", "put", "list", "exists", "size", "delete"],
)
def test_s3_missing_bucket_says_so_and_how_to_fix(
    minio_env: dict[str, str], operation: Callable[[S3Backend], object]
) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    with pytest.raises(StoreUnavailable) as caught:
        operation(S3Backend(f"s3://{bucket}/prefix"))
    assert caught.value.message.startswith(f"bucket {bucket} does not exist at {minio_env['AWS_ENDPOINT_URL']}")
    assert "create it" in (caught.value.hint or "")
    _assert_one_line(caught.value)


@pytest.mark.minio
@pytest.mark.parametrize(
    ("variable", "code"),
    [("AWS_SECRET_ACCESS_KEY", "SignatureDoesNotMatch"), ("AWS_ACCESS_KEY_ID", "InvalidAccessKeyId")],
)
def test_s3_wrong_credentials_give_a_credentials_hint(
    s3_store_url: str, monkeypatch: pytest.MonkeyPatch, variable: str, code: str
) -> None:
    monkeypatch.setenv(variable, "wrong-" + uuid.uuid4().hex)
    with pytest.raises(StoreUnavailable) as caught:
        S3Backend(s3_store_url).get("x")
    assert f"denied ({code})" in caught.value.message
    assert "AWS_ACCESS_KEY_ID" in (caught.value.hint or "")
    _assert_one_line(caught.value)


def test_s3_without_any_credentials_says_so(
    dead_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(StoreUnavailable) as caught:
        S3Backend("s3://bucket/prefix").get("x")
    assert caught.value.message.startswith("no usable credentials for store s3://bucket/prefix")
    _assert_one_line(caught.value)


def test_s3_url_without_bucket_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        S3Backend("s3:///prefix")


@pytest.mark.minio
def test_s3_reports_its_endpoint_and_object_lock(minio: MinioServer, minio_env: dict[str, str]) -> None:
    plain, locked = (f"test-{uuid.uuid4().hex[:16]}" for _ in range(2))
    minio.create_bucket(plain)
    minio.create_bucket(locked, object_lock=True)
    assert S3Backend(f"s3://{plain}").endpoint() == minio.api_url
    assert not S3Backend(f"s3://{plain}").object_lock_enabled()
    locked_store = S3Backend(f"s3://{locked}/p")
    assert locked_store.object_lock_enabled()
    locked_store.put("chunk", b"immutable", exclusive=True)  # Object Lock buckets demand a checksum on writes
    assert locked_store.get("chunk") == b"immutable"


@pytest.mark.minio
def test_minio_describe_never_shows_the_credentials(minio: MinioServer) -> None:
    assert minio.root_password not in minio.describe()
    assert minio.root_user not in minio.describe()
