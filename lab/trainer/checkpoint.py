"""The lab trainer's checkpoints: sharded safetensors in an S3 bucket, the index written last as the marker.

A checkpoint is the folder ``<run folder>/step-<step:06d>/`` with Hugging Face's sharded layout:
``model-00001-of-00003.safetensors`` (parameters), ``-00002-`` (momentum buffers), ``-00003-`` (global step
and data RNG state, the config in its header metadata), then ``model.safetensors.index.json``, whose
``weight_map`` names every tensor's shard. The index is written last, so it is the completion marker the
checkpoints plugin recognises (docs/checkpoints.md): a save killed half-way leaves shards and no index,
a torn checkpoint that neither a backup nor a resume may use. A resume takes the newest checkpoint whose
index is present and names only shards that exist.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from drtool_lab.trainer.model import Config, State, rng_from_array, rng_to_array

from drtool.errors import SourceError, UsageError
from drtool.plugin.toolkit.s3 import file_credentials

INDEX = "model.safetensors.index.json"
SHARDS = ("params", "momentum", "trainer")
_STEP_DIR = re.compile(r"^step-(\d+)$")


def shard_file(number: int) -> str:
    return f"model-{number:05d}-of-{len(SHARDS):05d}.safetensors"


def checkpoint_dir(folder: str, step: int) -> str:
    return posixpath.join(folder, f"step-{step:06d}")


class Bucket:
    """Objects under one ``s3://bucket/prefix``; credentials from a lab's MinIO or the usual AWS_* variables."""

    def __init__(self, location: Mapping[str, Any]) -> None:
        url = str(location.get("url") or "")
        if not url.startswith("s3://"):
            raise UsageError(f"trainer: checkpoint location {url!r} is not s3://BUCKET/PREFIX")
        self.bucket, _, self.prefix = url.removeprefix("s3://").partition("/")
        self.client = _client(location)

    def key(self, name: str) -> str:
        return posixpath.join(self.prefix, name) if self.prefix else name

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    def get(self, name: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"].read()

    def names(self, folder: str) -> list[str]:
        """Every object under ``folder``, relative to the location's prefix."""
        start = self.key(folder).rstrip("/") + "/"
        cut = len(self.key(""))
        found = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start):
            found += [obj["Key"][cut:].lstrip("/") for obj in page.get("Contents", [])]
        return found


def _client(location: Mapping[str, Any]) -> Any:
    """An S3 client for a checkpoints location as the plugin reads one: ``endpoint_url``, and the keys in the
    file ``credentials_file`` names (a lab MinIO's), else boto3's own chain."""
    import boto3

    keys = location.get("credentials_file")
    credentials = file_credentials(str(keys), None, "credentials_file") if keys else {}
    return boto3.session.Session().client("s3", endpoint_url=location.get("endpoint_url") or None, **credentials)


def save(bucket: Bucket, folder: str, state: State, config: Config, after_shard: Callable[[int], None]) -> str:
    """Write the state at its step: shards first, the index last; ``after_shard(n)`` runs after shard n."""
    from safetensors.numpy import save as encode

    where = checkpoint_dir(folder, state.step)
    contents = {
        "params": {f"params.{k}": v for k, v in state.params.items()},
        "momentum": {f"momentum.{k}": v for k, v in state.momentum.items()},
        "trainer": {"trainer.step": np.array([state.step], np.int64), "trainer.rng": rng_to_array(state.rng)},
    }
    weight_map, total = {}, 0
    header = {"config": json.dumps(dataclasses.asdict(config), sort_keys=True)}
    for number, shard in enumerate(SHARDS, 1):
        tensors = contents[shard]
        bucket.put(f"{where}/{shard_file(number)}", encode(tensors, metadata=header))
        weight_map |= dict.fromkeys(tensors, shard_file(number))
        total += sum(t.nbytes for t in tensors.values())
        after_shard(number)
    index = {"metadata": {"total_size": total, "step": state.step}, "weight_map": dict(sorted(weight_map.items()))}
    bucket.put(f"{where}/{INDEX}", json.dumps(index, indent=2).encode())
    return where


def complete_steps(bucket: Bucket, folder: str) -> list[int]:
    """Steps of the checkpoints under ``folder`` whose index is present and names only existing shards."""
    by_dir: dict[str, set[str]] = {}
    for name in bucket.names(folder):
        directory, _, base = name.rpartition("/")
        by_dir.setdefault(directory, set()).add(base)
    steps = []
    for directory, files in by_dir.items():
        match = _STEP_DIR.match(posixpath.basename(directory))
        if match and INDEX in files:
            index = json.loads(bucket.get(f"{directory}/{INDEX}"))
            if set(index["weight_map"].values()) <= files:
                steps.append(int(match.group(1)))
    return sorted(steps)


def load(bucket: Bucket, folder: str, step: int, config: Config) -> State:
    """The state saved at ``step``; refuses a checkpoint written with another configuration."""
    from safetensors.numpy import load as decode

    where = checkpoint_dir(folder, step)
    index = json.loads(bucket.get(f"{where}/{INDEX}"))
    tensors: dict[str, np.ndarray] = {}
    for shard in sorted(set(index["weight_map"].values())):
        raw = bucket.get(f"{where}/{shard}")
        saved = json.loads(json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])["__metadata__"]["config"])
        if saved != dataclasses.asdict(config):
            raise SourceError(f"trainer: {where}/{shard} was written with another configuration", str(saved))
        tensors |= decode(raw)
    state = State(
        params={k.removeprefix("params."): v for k, v in tensors.items() if k.startswith("params.")},
        momentum={k.removeprefix("momentum."): v for k, v in tensors.items() if k.startswith("momentum.")},
        step=int(tensors["trainer.step"][0]),
        rng=rng_from_array(tensors["trainer.rng"]),
    )
    if state.step != step:
        raise SourceError(f"trainer: {where} holds step {state.step}")
    return state
