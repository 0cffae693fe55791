"""Checkpoints over https: a MinIO serving TLS with a CA of its own, as an S3 endpoint in production does.

What differs from plain http is what botocore sends: over https the restore's uploads go without a SigV4
hash of their bodies (TLS protects them; about 0.8 CPU-s per GiB saved, docs/performance.md), over http
they keep it (the only thing that makes S3 refuse a body changed on the way). Both are read here from the
requests the plugin's own client sends to a real server, and the restored bytes are read back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drtool_lab.components.minio import MinioServer
from drtool_plugins.checkpoints import location as loc_mod
from drtool_plugins.checkpoints import samples

from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.fixtures.minio import minio_lab
from tests.plugins.test_checkpoints import PLUGIN, backup, source

pytestmark = pytest.mark.minio

UNSIGNED = "UNSIGNED-PAYLOAD"


@pytest.fixture(scope="module")
def tls_minio(lab_root: Path) -> Iterator[MinioServer]:
    with minio_lab(lab_root, "minio-tls", tls=True) as server:
        yield server


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(operation, x-amz-content-sha256) of every upload the plugin's clients send, as sent."""
    seen: list[tuple[str, str]] = []
    real = loc_mod.s3_client

    def recording(*args: Any, **kwargs: Any) -> Any:
        client = real(*args, **kwargs)

        def before_send(request: Any, event_name: str, **_: Any) -> None:
            digest = request.headers.get("x-amz-content-sha256", b"")
            seen.append((event_name.rsplit(".", 1)[-1], digest.decode() if isinstance(digest, bytes) else digest))

        for operation in ("UploadPart", "PutObject"):
            client.meta.events.register(f"before-send.s3.{operation}", before_send)
        return client

    monkeypatch.setattr(loc_mod, "s3_client", recording)
    return seen


def round_trip(repo: Repository, minio: MinioServer, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bytes]:
    """A 20 MiB checkpoint (two shards: multipart uploads) backed up and restored into another bucket of
    ``minio``; the restored shard's bytes as read back by the server's own client."""
    for name, value in minio.env().items():
        monkeypatch.setenv(name, value)
    client = minio.client()
    bucket, target = f"ckpt-{uuid.uuid4().hex[:8]}", f"restored-{uuid.uuid4().hex[:8]}"
    minio.create_bucket(bucket)
    minio.create_bucket(target)
    rng = np.random.default_rng(3)
    shards = [samples.random_tensors(rng, 1, (2560, 1024), f"block{i}") for i in range(2)]  # 10 MiB each

    def put(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"ck/{key}", Body=data)

    samples.write_safetensors(put, "run/checkpoint-5", shards)
    manifest, _ = backup(repo, source(minio, bucket))
    outcome = run_restore(repo, manifest, PLUGIN, {"url": f"s3://{target}/back", "endpoint_url": minio.api_url})
    assert outcome.result.changed and outcome.verified, outcome.checks
    key = "run/checkpoint-5/model-00001-of-00002.safetensors"
    original = client.get_object(Bucket=bucket, Key=f"ck/{key}")["Body"].read()
    restored = client.get_object(Bucket=target, Key=f"back/{key}")["Body"].read()
    assert restored == original and len(original) > 10 << 20
    return key, restored


def test_over_https_uploads_are_not_hashed_for_signing(
    repo: Repository, tls_minio: MinioServer, sent: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tls_minio.api_url.startswith("https://")
    round_trip(repo, tls_minio, monkeypatch)
    assert len([op for op, _ in sent if op == "UploadPart"]) >= 4, sent  # two shards of two parts or more
    assert {digest for _, digest in sent} == {UNSIGNED}, sent


def test_over_http_uploads_keep_their_signed_hash(
    repo: Repository, minio: MinioServer, sent: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    round_trip(repo, minio, monkeypatch)
    assert len([op for op, _ in sent if op == "UploadPart"]) >= 4, sent
    assert all(len(digest) == 64 and digest != UNSIGNED for _, digest in sent), sent


def test_an_endpoint_from_the_environment_decides_as_a_named_one(
    tls_minio: MinioServer, minio: MinioServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No endpoint in the settings: AWS_ENDPOINT_URL names it; the client signs bodies only over http."""
    for server, signs in ((tls_minio, False), (minio, True)):
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        client = loc_mod.s3_client(None, None)
        assert client.meta.endpoint_url == server.api_url
        assert client.meta.config.s3["payload_signing_enabled"] is signs
