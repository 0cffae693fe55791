"""Fault drills against the store: injected 5xx answers, slow answers, an outage, MinIO stopped mid-upload,
and a local store whose filesystem fills up. In every case: a clear one-line error or success, no visible
partial backup, `drtool check --read-data` clean, and the next run completes and deduplicates."""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drtool.lab.components.minio import MinioServer
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


def _assert_store_clean(cli: Cli) -> None:
    report = json.loads(cli("check", "--read-data", "--json", check=True).stdout)
    assert report["ok"] and not report["missing_chunks"], report


def test_injected_5xx_are_retried_and_never_leave_a_torn_backup(
    cli: Cli, tmp_path: Path, s3_store_url: str, fault_proxy: FaultProxy, minio_env: dict[str, str]
) -> None:
    src = _source(cli, tmp_path, 24 * MIB)
    cli.env.update(minio_env)
    cli.env["AWS_ENDPOINT_URL"] = fault_proxy.url
    cli("init", "--store", s3_store_url, check=True)
    outcomes = []
    for run, status in enumerate((503, 500, 503, 500)):
        fault_proxy.configure(error_rate=0.08, error_status=status)
        (src / f"new-{run}.bin").write_bytes(random.Random(run).randbytes(4 * MIB))
        proc = cli("backup", "-p", "files", "--json")
        if proc.returncode != 0:
            assert_clean_error(proc, 3)
        outcomes.append(proc.returncode)
    fault_proxy.configure()
    # the faults really happened: format 2 makes about 80 requests per backup here (packs), so 8 % is ~6 each
    assert fault_proxy.injected >= 5, fault_proxy.injected
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


def _wait_for_objects(server: MinioServer, bucket: str, prefix: str, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=count)
        if listed.get("KeyCount", 0) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} objects reached {bucket}/{prefix} in {timeout}s")


@pytest.fixture
def own_minio(lab_root: Path) -> Iterator[MinioServer]:
    """A MinIO of this test's own, so stopping it does not disturb the session's."""
    with minio_lab(lab_root, "minio-outage") as server:
        yield server


def test_minio_stopped_mid_upload_then_restarted(cli: Cli, tmp_path: Path, own_minio: MinioServer) -> None:
    _source(cli, tmp_path, 160 * MIB)
    own_minio.create_bucket("outage")
    cli.env.update(own_minio.env())
    cli("init", "--store", "s3://outage/dr", check=True)
    proc = cli.popen("backup", "-p", "files", "--json")
    _wait_for_objects(own_minio, "outage", "dr/packs/", 3)  # 3 of 10 packs landed: well inside the upload
    own_minio.stop()
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 3, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    own_minio.start()
    assert _listed(cli) == {}  # nothing half-visible
    done = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    assert done["status"] == "complete"
    assert done["stats"]["chunks_new"] < done["stats"]["chunks"]  # what reached MinIO before the stop is reused
    _assert_store_clean(cli)


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
