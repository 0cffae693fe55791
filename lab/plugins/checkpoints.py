"""LabSupport: real checkpoints of every kind in the lab's MinIO, and an empty bucket to restore into.

Besides the sample checkpoints, the seed runs the lab trainer (``drtool_lab.training``) in the same
location until it is killed while saving: run ``mlp`` holds complete checkpoints at steps 10 and 20 and a
torn one at step 30, what the ``training-resumes`` plan check resumes from after a restore.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from drtool_lab import training
from drtool_plugins.checkpoints import samples

if TYPE_CHECKING:
    from drtool_lab.components.minio import MinioServer
    from drtool_lab.lab import Lab

SOURCE_BUCKET = "training"
TARGET_BUCKET = "restored-checkpoints"


def _minio(lab: Lab) -> MinioServer:
    lab.up(["minio"])
    server = lab.first("minio")
    assert server is not None
    return server  # type: ignore[return-value]


def _location(minio: MinioServer) -> dict[str, str]:
    """Settings that point a location at the lab's MinIO: its endpoint, and its keys in a file."""
    return {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}


def seed_bucket(client: Any, bucket: str, prefix: str, scale: int = 1) -> None:
    """Two runs: complete DCP, safetensors and marker checkpoints, one of each kind incomplete, and a
    container checkpoint archive."""
    import numpy as np

    def put(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)

    rng = np.random.default_rng(7)
    shape = (64 * scale, 256)
    for step in (100, 200):
        samples.write_dcp(put, f"llama-ft/step-{step}", samples.random_tensors(rng, 4, shape), ranks=2)
    samples.write_dcp(put, "llama-ft/step-300", samples.random_tensors(rng, 4, shape), finished=False)
    shards = [samples.random_tensors(rng, 2, shape, f"s{i}") for i in range(4)]
    samples.write_safetensors(put, "bert-base/checkpoint-500", shards)
    samples.write_safetensors(put, "bert-base/checkpoint-600", shards[:2], with_index=False)
    put("bert-base/checkpoint-600/model.safetensors.index.json", json.dumps({"weight_map": {"x": "gone"}}).encode())
    put("rl-agent/iter-40/policy.bin", rng.bytes(1 << 16))
    put("rl-agent/iter-40/COMPLETE", b"")
    put("rl-agent/iter-50/policy.bin", rng.bytes(1 << 16))
    archive = samples.container_archive({"config.dump": b"{}", "checkpoint/pages-1.img": rng.bytes(1 << 15)})
    put("kubelet/checkpoint-trainer-0_ml-trainer-2026-11-29T10-00-00Z.tar", archive)


class CheckpointsLab:
    kinds: tuple[str, ...] = ("minio",)

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        minio = _minio(lab)
        minio.create_bucket(SOURCE_BUCKET)
        seed_bucket(minio.client(), SOURCE_BUCKET, "runs", scale)
        training.torn_run(lab, {"url": f"s3://{SOURCE_BUCKET}/runs", **_location(minio)})
        return {"sources": [{"name": "training", "url": f"s3://{SOURCE_BUCKET}/runs", **_location(minio)}]}

    def target(self, lab: Lab) -> dict[str, Any]:
        minio = _minio(lab)
        minio.create_bucket(TARGET_BUCKET)
        return {"url": f"s3://{TARGET_BUCKET}/runs", **_location(minio)}
