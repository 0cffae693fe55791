"""A checkpoint backup into a store in S3 holds what it has in flight, not what it reads: the peak of the
Python heap (tracemalloc: every buffer of the data path is a Python object, the pack buffers and the
chunker's windows, which the source is read straight into) of a backup of more bytes than that budget, above
the peak of a backup of a nearly empty checkpoint, stays within the budget drtool/repo/packed.py and
drtool/repo/chunker.py set: per object read at once a pack being filled and three chunker windows, and
besides them the shared pack, the packs uploading and one more (144 MiB; it was 160 with a window's worth of
reads held per object; measured: 66). A bound, not a comparison of two peaks: how many packs are uploading
at the peak depends on timing, what may be held does not (docs/performance.md, "The S3 path's memory")."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest
from drtool_lab.components.minio import MinioServer
from drtool_plugins.checkpoints import CheckpointsPlugin
from drtool_plugins.checkpoints.settings import DEFAULT_BACKUP_WORKERS

from drtool.backends import open_backend
from drtool.backup import run_backup
from drtool.repo.chunker import RETIRED
from drtool.repo.packed import PACKS_IN_FLIGHT
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE
from tests.plugins.test_checkpoints import s3

pytestmark = pytest.mark.minio
PLUGIN = CheckpointsPlugin()
MiB = 1 << 20
PACK = 16 * MiB
WINDOW = 8 * MiB  # the chunker's window: two largest chunks
# a pack being filled and three chunker windows: the one being read into, and up to two whose chunks are
# still being sealed (drtool/repo/chunker.py); the source's reads land in the window itself
STREAM = PACK + (1 + RETIRED) * WINDOW
# besides the streams' packs: the shared pack, those uploading, and one more. A spare is the buffer of a
# finished upload, and a new one is made only when no spare is left, so however many spares are kept
# (``SPARE_BUFFERS``), no more than one buffer beyond the shared pack and the uploads is ever alive
BUDGET = DEFAULT_BACKUP_WORKERS * STREAM + (2 + PACKS_IN_FLIGHT) * PACK


def _seed(minio: MinioServer, bucket: str, prefix: str, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(DEFAULT_BACKUP_WORKERS):
        s3(minio).put_object(Bucket=bucket, Key=f"{prefix}/run/step-1/shard-{i}.bin", Body=rng.bytes(size))
    s3(minio).put_object(Bucket=bucket, Key=f"{prefix}/run/step-1/COMPLETE", Body=b"")


def _peak(store: str, minio: MinioServer, bucket: str, prefix: str) -> int:
    """The heap's peak while a new store in S3 takes a backup of the checkpoint under ``prefix``."""
    repo = Repository.init(open_backend(store), passphrase=PASSPHRASE)  # its key derivation not counted
    src = {"sources": [{"name": "train", "url": f"s3://{bucket}/{prefix}", "endpoint_url": minio.api_url}]}
    gc.collect()
    tracemalloc.start()
    try:
        manifest = run_backup(repo, [PLUGIN], {"checkpoints": src})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert manifest.plugins["checkpoints"].status == "ok"
    return peak


def test_backup_memory_is_bounded_by_what_is_in_flight(
    s3_store_url: str, minio: MinioServer, minio_env: dict, bucket: str
) -> None:
    per_object = -(-BUDGET // DEFAULT_BACKUP_WORKERS // PACK) * PACK + PACK  # all of them: more than the budget
    peaks = {}
    for seed, (name, size) in enumerate({"tiny": MiB, "large": per_object}.items()):
        _seed(minio, bucket, name, size, seed)
        peaks[name] = _peak(f"{s3_store_url}-{name}", minio, bucket, name)
    shown = ", ".join(f"{k} {v / MiB:.0f} MiB" for k, v in peaks.items())
    assert peaks["large"] - peaks["tiny"] < BUDGET, f"the data path held more than {BUDGET / MiB:.0f} MiB: {shown}"
