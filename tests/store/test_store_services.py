"""The store on real MinIO and the catalog on real PostgreSQL, driven through the CLI as a user would."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from drtool.servers.process import free_port
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.noise import noise


def _files_source(cli: Cli, tmp_path: Path) -> Path:
    src = tmp_path / "pki"
    src.mkdir()
    (src / "sa.key").write_bytes(noise(2048, 1))
    (src / "weights.bin").write_bytes(noise(6 * 1024 * 1024, 2))
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"paths": [str(src)]}}}))
    return src


def test_s3_round_trip_and_rebuild_elsewhere(
    cli: Cli, tmp_path: Path, s3_store_url: str, minio_env: dict[str, str]
) -> None:
    src = _files_source(cli, tmp_path)
    cli.env.update(minio_env)
    cli("init", "--store", s3_store_url, check=True)
    first = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    second = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)
    assert second["stats"]["bytes_stored"] == 0 and second["stats"]["chunks"] == first["stats"]["chunks"]
    fresh = Cli(tmp_path / "elsewhere")
    fresh.home.mkdir()
    fresh.env.update(minio_env)
    fresh("--store", s3_store_url, "catalog", "rebuild", check=True)
    listed = json.loads(fresh("--store", s3_store_url, "list", "--json", check=True).stdout)
    assert [b["id"] for b in listed] == [first["id"], second["id"]]  # in the order made, also within one second
    report = json.loads(fresh("--store", s3_store_url, "check", "--read-data", "--json", check=True).stdout)
    assert report["ok"] and report["chunks_read"] == report["chunks_referenced"] > 0
    dest = tmp_path / "restored"
    fresh("--store", s3_store_url, "restore", first["id"], "-p", "files", "-t", f"path={dest}", check=True)
    assert (dest / "0-pki" / "weights.bin").read_bytes() == (src / "weights.bin").read_bytes()


def test_unreachable_store_fails_fast_with_one_line(cli: Cli, minio_env: dict[str, str]) -> None:
    cli.env.update(minio_env)
    cli.env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    proc = cli("--store", "s3://bucket/prefix", "list")
    assert time.monotonic() - started < 30
    assert_clean_error(proc, 3, "cannot reach store")


def test_missing_bucket(cli: Cli, minio_env: dict[str, str]) -> None:
    cli.env.update(minio_env)
    assert_clean_error(cli("init", "--store", "s3://no-such-bucket-drtool/x"), 3, "no-such-bucket-drtool")


@pytest.mark.postgres
def test_catalog_on_postgresql(cli: Cli, tmp_path: Path, postgres_url: str) -> None:
    _files_source(cli, tmp_path)
    store = tmp_path / "store"
    cli.env["DRTOOL_CATALOG"] = postgres_url
    cli("init", "--store", str(store), check=True)
    ids = [json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["id"] for _ in range(2)]
    from drtool.catalog import Catalog

    catalog = Catalog(postgres_url)
    try:
        with catalog.engine.connect() as conn:
            rows = conn.exec_driver_sql("select id, status from backups order by id").all()
        # two backups can share one second, and ids of one second sort by their random suffix
        assert [r[0] for r in rows] == sorted(ids) and {r[1] for r in rows} == {"complete"}
        assert catalog.engine.url.get_backend_name() == "postgresql"
    finally:
        catalog.close()
    cli("catalog", "rebuild", check=True)
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert sorted(b["id"] for b in listed) == sorted(ids)
