"""The checkpoints plugin's writes into an S3 target (plugins/checkpoints/upload.py), against the session's
MinIO: multipart objects land whole with their SHA-256, and a chunk that fails authentication mid-object
aborts the upload, so the target shows neither the object nor an unfinished upload."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import numpy as np
import pytest
from drtool_lab.components.minio import MinioServer
from drtool_plugins.checkpoints import CheckpointsPlugin
from drtool_plugins.checkpoints.location import SHA_META
from drtool_plugins.checkpoints.upload import PART

from drtool.backup import run_backup
from drtool.errors import IntegrityError
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.fixtures.stores import flip_byte
from tests.plugins.test_checkpoints import s3

pytestmark = pytest.mark.minio
PLUGIN = CheckpointsPlugin()
BIG = "run/step-3/model.bin"  # three parts, the last one short
SIZES = {BIG: 2 * PART + 123_457, "run/step-3/optim.bin": 70_000, "run/step-3/COMPLETE": 0}


def _backup(repo: Repository, minio: MinioServer, bucket: str) -> tuple[Any, dict[str, bytes]]:
    rng = np.random.default_rng(17)
    data = {key: rng.bytes(size) for key, size in SIZES.items()}
    for key, body in data.items():
        s3(minio).put_object(Bucket=bucket, Key=f"ck/{key}", Body=body)
    src = {"sources": [{"name": "train", "url": f"s3://{bucket}/ck", "endpoint_url": minio.api_url}]}
    return run_backup(repo, [PLUGIN], {"checkpoints": src}), data


def _target(minio: MinioServer) -> tuple[str, dict[str, str]]:
    name = f"restored-{uuid.uuid4().hex[:8]}"
    minio.create_bucket(name)
    return name, {"url": f"s3://{name}/resume", "endpoint_url": minio.api_url}


def test_a_multipart_restore_lands_whole_with_its_digest(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str
) -> None:
    manifest, data = _backup(repo, minio, bucket)
    name, target = _target(minio)
    outcome = run_restore(repo, manifest, PLUGIN, target, options={"workers": "2"})
    assert outcome.verified, outcome.checks
    for key, body in data.items():
        got = s3(minio).get_object(Bucket=name, Key=f"resume/{key}")
        assert got["Body"].read() == body, key
        assert got["Metadata"][SHA_META] == hashlib.sha256(body).hexdigest()
    assert s3(minio).head_object(Bucket=name, Key=f"resume/{BIG}")["ETag"].strip('"').endswith("-3")  # 3 parts


def test_a_damaged_chunk_aborts_the_upload_and_leaves_nothing_visible(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str
) -> None:
    manifest, _ = _backup(repo, minio, bucket)
    big = next(a for a in manifest.artifacts if a.name.endswith(BIG))
    flip_byte(repo, big.chunks[-1][0])  # the last chunk: two parts are sent before it is read
    name, target = _target(minio)
    with pytest.raises(IntegrityError) as failed:
        run_restore(repo, manifest, PLUGIN, target)
    assert "\n" not in failed.value.one_line()
    assert "Contents" not in s3(minio).list_objects_v2(Bucket=name), "no object, partial or not"
    assert not s3(minio).list_multipart_uploads(Bucket=name).get("Uploads"), "the upload was aborted"
