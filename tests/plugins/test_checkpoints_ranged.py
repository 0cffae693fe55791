"""Large source objects read as parallel ranged GETs on backup, against a real MinIO (docs/checkpoints.md,
"Large objects"): the bytes restored are the source's, the requests are counted on the plugin's own boto3
client (botocore's event hook, not a mock), an object replaced between two ranges makes the copy torn, a
damaged range fails the source checksum, and what is fetched ahead stays within the one byte budget.

Sizes are small (thresholds and ranges set through the plugin's options) so each test takes seconds.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from drtool_lab.components.minio import MinioServer
from drtool_plugins.checkpoints import location as loc_mod
from drtool_plugins.checkpoints import ranged
from drtool_plugins.checkpoints.settings import BackupSettings

from drtool.errors import SourceError, UsageError
from drtool.memory import ByteBudget
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.plugins.test_checkpoints import PLUGIN, backup, get, s3, source

pytestmark = pytest.mark.minio
MiB = 1 << 20


def put_large(minio: MinioServer, bucket: str, key: str, data: bytes, crc32: bool) -> None:
    """One object, single-part; with ``crc32`` it carries a whole-object CRC32 (else its ETag is the MD5)."""
    extra = {"ChecksumAlgorithm": "CRC32"} if crc32 else {}
    s3(minio).put_object(Bucket=bucket, Key=f"ck/{key}", Body=data, **extra)


class Requests:
    """GetObject and HeadObject calls the plugin's client makes, with their parameters, seen through
    botocore's ``before-parameter-build`` event on every client the plugin creates."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        real = loc_mod.s3_client

        def hooked(*args: Any, **kwargs: Any) -> Any:
            client = real(*args, **kwargs)
            for op in ("GetObject", "HeadObject"):
                client.meta.events.register(f"before-parameter-build.s3.{op}", self._seen(op))
            return client

        monkeypatch.setattr(loc_mod, "s3_client", hooked)

    def _seen(self, op: str) -> Callable[..., None]:
        def record(params: dict[str, Any], **_: Any) -> None:
            with self._lock:
                self.calls.append((op, dict(params)))

        return record

    def of(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        return [(op, p) for op, p in self.calls if p["Key"].endswith(key)]


def test_large_object_is_read_in_ranges_and_restores_bit_identical(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(17)
    large, small = rng.bytes(40 * MiB + 123), rng.bytes(3 * MiB)
    put_large(minio, bucket, "run/step-1/model.bin", large, crc32=True)
    put_large(minio, bucket, "run/step-1/optim.bin", small, crc32=False)
    s3(minio).put_object(Bucket=bucket, Key="ck/run/step-1/COMPLETE", Body=b"")
    requests = Requests(monkeypatch)
    options = {"ranged_threshold": "8MiB", "range_size": "4MiB", "ranges_in_flight": 3}
    manifest, meta = backup(repo, source(minio, bucket, **options))

    assert [c["checkpoint"] for c in meta["checkpoints"]] == ["run/step-1"] and meta["torn_retries"] == 0
    calls = requests.of("model.bin")
    gets = [p for op, p in calls if op == "GetObject"]
    assert [op for op, _ in calls].count("HeadObject") == 1, "the whole-object checksum comes from one HEAD"
    assert len(gets) == 11, "40 MiB + 123 bytes in 4 MiB ranges"
    starts = sorted(int(p["Range"].removeprefix("bytes=").split("-")[0]) for p in gets)
    assert starts == [i * 4 * MiB for i in range(11)]
    etag = s3(minio).head_object(Bucket=bucket, Key="ck/run/step-1/model.bin")["ETag"]
    assert all(p["IfMatch"] == etag for p in gets), "every range is pinned to the listed version"
    small_gets = [p for op, p in requests.of("optim.bin") if op == "GetObject"]
    assert len(small_gets) == 1 and "Range" not in small_gets[0], "below the threshold: one plain GET"

    arts = {a.name: a for a in manifest.artifacts}
    assert arts["train/run/step-1/model.bin"].meta["source_checksums"] == ["crc32"]
    assert arts["train/run/step-1/optim.bin"].meta["source_checksums"] == ["md5"]
    target_bucket = f"restored-{uuid.uuid4().hex[:8]}"
    minio.create_bucket(target_bucket)
    outcome = run_restore(repo, manifest, PLUGIN, {"url": f"s3://{target_bucket}/r", "endpoint_url": minio.api_url})
    assert outcome.result.changed and outcome.verified, outcome.checks
    assert get(minio, target_bucket, "r/run/step-1/model.bin") == large
    assert get(minio, target_bucket, "r/run/step-1/optim.bin") == small


class _ReplaceAfterFirstRange:
    """Wraps S3Location.read_blocks: after the first range of ``key`` was read, the trainer writes the object
    anew (``times`` times). With one range in flight no other GET of it is open at that moment."""

    def __init__(self, minio: MinioServer, bucket: str, key: str, times: int) -> None:
        self.minio, self.bucket, self.key, self.times = minio, bucket, key, times
        self.real = loc_mod.S3Location.read_blocks
        self.replaced = 0

    def __call__(self, loc: Any, key: str, start: int, length: int, etag: str = "") -> list[bytes]:
        data = self.real(loc, key, start, length, etag)
        if key.endswith(self.key) and start == 0 and etag and self.replaced < self.times:
            self.replaced += 1
            new = np.random.default_rng(100 + self.replaced).bytes(8 * MiB)
            s3(self.minio).put_object(Bucket=self.bucket, Key=f"ck/{key}", Body=new)
        return data


@pytest.mark.parametrize(("times", "retries"), [(1, 2), (99, 1)], ids=["retried", "skipped"])
def test_object_replaced_between_ranges_makes_the_copy_torn(
    repo: Repository,
    minio: MinioServer,
    minio_env: dict,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    times: int,
    retries: int,
) -> None:
    put_large(minio, bucket, "run/step-2/model.bin", np.random.default_rng(0).bytes(8 * MiB), crc32=True)
    s3(minio).put_object(Bucket=bucket, Key="ck/run/step-2/COMPLETE", Body=b"")
    hook = _ReplaceAfterFirstRange(minio, bucket, "model.bin", times)
    monkeypatch.setattr(loc_mod.S3Location, "read_blocks", lambda loc, *a, **kw: hook(loc, *a, **kw))
    options = {"ranged_threshold": "2MiB", "range_size": "1MiB", "ranges_in_flight": 1, "retries": retries}
    manifest, meta = backup(repo, source(minio, bucket, **options))
    if times == 1:
        assert hook.replaced == 1 and meta["torn_retries"] == 1
        [art] = [a for a in manifest.artifacts if a.name.endswith("model.bin")]
        assert art.meta["etag"] == s3(minio).head_object(Bucket=bucket, Key="ck/run/step-2/model.bin")["ETag"].strip(
            '"'
        )
        assert art.size == 8 * MiB
    else:
        assert hook.replaced == retries + 1 and meta["checkpoints"] == []
        assert "changed during backup on each of 2 attempts" in meta["skipped"][0]["reason"]
        assert not manifest.artifacts, "a torn copy is never stored"


@pytest.mark.parametrize("crc32", [True, False], ids=["crc32", "md5-etag"])
def test_damaged_range_fails_the_source_checksum(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, monkeypatch: pytest.MonkeyPatch, crc32: bool
) -> None:
    put_large(minio, bucket, "run/step-3/model.bin", np.random.default_rng(3).bytes(6 * MiB), crc32=crc32)
    s3(minio).put_object(Bucket=bucket, Key="ck/run/step-3/COMPLETE", Body=b"")
    real = loc_mod.S3Location.read_blocks

    def damaged_in_transit(loc: Any, key: str, start: int, length: int, etag: str = "") -> list[bytes]:
        blocks = real(loc, key, start, length, etag)
        if start == 2 * MiB:
            blocks[0] = blocks[0][:100] + bytes([blocks[0][100] ^ 1]) + blocks[0][101:]
        return blocks

    monkeypatch.setattr(loc_mod.S3Location, "read_blocks", damaged_in_transit)
    options = {"ranged_threshold": "1MiB", "range_size": "1MiB"}
    with pytest.raises(SourceError) as err:
        backup(repo, source(minio, bucket, **options))
    algo = "crc32" if crc32 else "md5"
    assert f"{algo} of the bytes read differs from the source's {algo}" in str(err.value)
    assert "\n" not in str(err.value)


def test_bytes_fetched_ahead_stay_within_one_budget(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four large objects read at once, each wanting four 1 MiB ranges ahead: a 2 MiB budget bounds them
    all to 2 MiB plus one range per object (the first range of each is always granted)."""
    rng = np.random.default_rng(4)
    for i in range(4):
        put_large(minio, bucket, f"run/step-4/shard-{i}.bin", rng.bytes(12 * MiB), crc32=True)
    s3(minio).put_object(Bucket=bucket, Key="ck/run/step-4/COMPLETE", Body=b"")
    limit, range_size, workers = 2 * MiB, 1 * MiB, 4
    budget = ByteBudget(limit)
    monkeypatch.setattr(ranged, "ByteBudget", lambda: budget)
    in_flight = {"now": 0, "peak": 0, "budget_peak": 0}
    lock = threading.Lock()

    def count(delta: int) -> None:
        with lock:
            in_flight["now"] += delta
            in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
            in_flight["budget_peak"] = max(in_flight["budget_peak"], budget.used)

    real_blocks, real_read = loc_mod.S3Location.read_blocks, ranged.RangedStream.read

    def fetched(loc: Any, key: str, start: int, length: int, etag: str = "") -> list[bytes]:
        blocks = real_blocks(loc, key, start, length, etag)
        count(sum(map(len, blocks)))
        return blocks

    def consumed(stream: ranged.RangedStream, n: int = -1) -> bytes:
        block = real_read(stream, n)
        count(-len(block))
        return block

    monkeypatch.setattr(loc_mod.S3Location, "read_blocks", fetched)
    monkeypatch.setattr(ranged.RangedStream, "read", consumed)
    options = {"ranged_threshold": "1MiB", "range_size": "1MiB", "ranges_in_flight": 4, "workers": workers}
    _, meta = backup(repo, source(minio, bucket, **options))
    assert meta["objects_read"] == 5 and in_flight["now"] == 0
    bound = limit + workers * range_size
    assert 0 < in_flight["peak"] <= bound, in_flight
    assert in_flight["budget_peak"] <= bound and budget.used == 0, in_flight


@pytest.mark.parametrize(
    ("option", "value"),
    [("range_size", "8MB"), ("range_size", 0), ("ranged_threshold", "big"), ("ranges_in_flight", "2.5")],
)
def test_ranged_options_are_parsed_strictly(option: str, value: Any) -> None:
    with pytest.raises(UsageError, match=option):
        BackupSettings.parse({"url": "s3://b/p", option: value})
