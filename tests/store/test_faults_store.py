"""Fault drills against the store: injected 5xx answers, slow answers, an outage, MinIO stopped mid-upload,
and a local store whose filesystem fills up. In every case: a clear one-line error or success, no visible
partial backup, `drtool check --read-data` clean, and the next run completes and deduplicates."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.components.minio import MinioServer

from drtool.repo import layout
from tests.fixtures import stores
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.faults import FaultProxy
from tests.fixtures.minio import minio_lab

MIB = 1024 * 1024


def _source(cli: Cli, tmp_path: Path, size: int, seed: int = 3) -> Path:
    src = tmp_path / "data"
    src.mkdir(exist_ok=True)
    (src / "weights.bin").write_bytes(random.Random(seed).randbytes(size))
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"paths": [str(src)]}}}))
    return src


def _listed(cli: Cli) -> dict[str, dict]:  # type: ignore[type-arg]
    return {b["id"]: b for b in json.loads(cli("list", "--json", check=True).stdout)}


def _assert_store_clean(cli: Cli) -> dict[str, Any]:
    report = json.loads(cli("check", "--read-data", "--json", check=True).stdout)
    assert report["ok"] and not report["missing_chunks"], report
    return report  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", stores.FORMATS)
def test_injected_5xx_are_retried_and_never_leave_a_torn_backup(
    cli: Cli, tmp_path: Path, s3_store_url: str, fault_proxy: FaultProxy, minio_env: dict[str, str], version: int
) -> None:
    src = _source(cli, tmp_path, 24 * MIB)
    cli.env.update(minio_env)
    cli.env["AWS_ENDPOINT_URL"] = fault_proxy.url
    stores.init(cli, s3_store_url, version)
    outcomes = []
    for run, status in enumerate((503, 500, 503, 500)):
        fault_proxy.configure(error_rate=0.08, error_status=status)
        (src / f"new-{run}.bin").write_bytes(random.Random(run).randbytes(4 * MIB))
        proc = cli("backup", "-p", "files", "--json")
        if proc.returncode != 0:
            assert_clean_error(proc, 3)
        outcomes.append(proc.returncode)
    random_faults = fault_proxy.injected
    # Few of those land on chunk data in format 2 (a backup writes a 16 MiB pack where format 1 wrote 16
    # chunk objects), so one more backup has every upload of chunk data refused twice: only the last of its
    # three attempts lands, and the backup must complete all the same.
    chunk_data = layout.PACKS if version == 2 else layout.CHUNKS
    repo = stores.open_repo(cli, s3_store_url)
    before = set(stores.chunk_objects(repo))
    fault_proxy.configure(match=f"/{chunk_data}", per_request=2, error_status=500)
    (src / "new-last.bin").write_bytes(random.Random(9).randbytes(20 * MIB))
    cli("backup", "-p", "files", "--json", check=True)
    fault_proxy.configure()
    landed = set(stores.chunk_objects(repo)) - before
    refused = collections.Counter(line.split("?")[0] for line in fault_proxy.injected_requests)
    bucket, prefix = s3_store_url.removeprefix("s3://").split("/", 1)
    assert landed and all(refused[f"PUT /{bucket}/{prefix}/{name}"] == 2 for name in landed), (landed, refused)
    # the proxy's random generator is seeded: about 6 % of this test's ~75 requests in format 2, more in 1
    assert random_faults >= 5, random_faults  # the random faults really happened
    assert outcomes.count(0) >= 3, outcomes  # retries with backoff absorb an 8% error rate
    assert all(b["status"] == "complete" for b in _listed(cli).values())
    _assert_store_clean(cli)


def test_slow_store_still_completes(
    cli: Cli, tmp_path: Path, s3_store_url: str, fault_proxy: FaultProxy, minio_env: dict[str, str]
) -> None:
    _source(cli, tmp_path, 6 * MIB)
    cli.env.update(minio_env)
    cli.env["AWS_ENDPOINT_URL"] = fault_proxy.url
    cli("init", "--store", s3_store_url, check=True)
    fault_proxy.configure(delay=0.25)
    started = time.monotonic()
    out = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    requests_made = fault_proxy.forwarded
    assert out["status"] == "complete"
    assert time.monotonic() - started >= 0.25 * requests_made * 0.5  # the delay really applied (some in parallel)


def test_store_that_stays_down_fails_clearly_and_the_next_run_completes(
    cli: Cli, tmp_path: Path, s3_store_url: str, fault_proxy: FaultProxy, minio_env: dict[str, str]
) -> None:
    _source(cli, tmp_path, 4 * MIB)
    cli.env.update(minio_env)
    cli.env["AWS_ENDPOINT_URL"] = fault_proxy.url
    cli("init", "--store", s3_store_url, check=True)
    fault_proxy.configure(error_rate=1.0)
    started = time.monotonic()
    assert_clean_error(cli("backup", "-p", "files"), 3)
    assert time.monotonic() - started < 120
    fault_proxy.configure()
    assert _listed(cli) == {}
    assert json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["status"] == "complete"
    _assert_store_clean(cli)


def _wait_for_bytes(server: MinioServer, bucket: str, prefix: str, size: int, timeout: float = 120) -> None:
    """Until objects under ``prefix`` holding ``size`` bytes in all have landed in ``bucket``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        if sum(obj["Size"] for page in pages for obj in page.get("Contents", ())) >= size:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {size} bytes reached {bucket}/{prefix} in {timeout}s")


@pytest.fixture
def own_minio(lab_root: Path) -> Iterator[MinioServer]:
    """A MinIO of this test's own, so stopping it does not disturb the session's."""
    with minio_lab(lab_root, "minio-outage") as server:
        yield server


@pytest.mark.parametrize("version", stores.FORMATS)
def test_minio_stopped_mid_upload_then_restarted(
    cli: Cli, tmp_path: Path, own_minio: MinioServer, version: int
) -> None:
    _source(cli, tmp_path, 160 * MIB)
    own_minio.create_bucket("outage")
    cli.env.update(own_minio.env())
    stores.init(cli, "s3://outage/dr", version)
    proc = cli.popen("backup", "-p", "files", "--json")
    chunk_data = "dr/" + (layout.PACKS if version == 2 else layout.CHUNKS)
    # a fifth of the data has landed (format 1: about 30 chunk objects; format 2: two 16 MiB packs of ten)
    _wait_for_bytes(own_minio, "outage", chunk_data, 32 * MIB)
    own_minio.stop()
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 3, err  # stopped well inside the upload
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    own_minio.start()
    assert _listed(cli) == {}  # nothing half-visible
    done = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    assert done["status"] == "complete"
    assert done["stats"]["chunks_new"] < done["stats"]["chunks"]  # what reached MinIO before the stop is reused
    report = _assert_store_clean(cli)
    # every object that landed was whole and is used now (format 2: adopted, which reads each pack's header)
    assert not report["orphan_chunks"] and not report["orphan_packs"], report


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 12 MiB tmpfs: a store whose disk fills up (root only; mounting is what makes the fill real)."""
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_local_store_disk_full(cli: Cli, tmp_path: Path, small_filesystem: Path) -> None:
    src = _source(cli, tmp_path, 3 * MIB)
    store = small_filesystem / "store"
    cli("init", "--store", str(store), check=True)
    first = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    (src / "big.bin").write_bytes(random.Random(9).randbytes(24 * MIB))  # does not fit in what is left
    assert_clean_error(cli("backup", "-p", "files"), 3, "free space")
    assert list(_listed(cli)) == [first["id"]]
    _assert_store_clean(cli)
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_filesystem)], check=True)
    again = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    assert again["status"] == "complete"
    _assert_store_clean(cli)
