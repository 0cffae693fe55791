"""etcd through the CLI: TLS backup from config, restore into a new started etcd, and the failure paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from drtool_lab.etcd_seed import settings_of

from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import Cli, assert_clean_error


def _configure(cli: Cli, tmp_path: Path, source: dict[str, str]) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"store": str(tmp_path / "store"), "sources": {"etcd": source}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)


def test_tls_backup_and_restore_into_a_new_etcd(
    cli: Cli, tmp_path: Path, lab_root: Path, etcd_tls_source: EtcdServer
) -> None:
    _configure(cli, tmp_path, settings_of(etcd_tls_source))
    backup = json.loads(cli("backup", "--json", check=True).stdout)
    assert backup["status"] == "complete" and backup["plugins"]["etcd"]["meta"]["keys"] > 400
    assert backup["failure_domain"]["etcd_endpoints"] == [etcd_tls_source.client_url]
    data_dir = tmp_path / "new" / "data"
    args = [
        "restore",
        backup["id"],
        "-p",
        "etcd",
        "-t",
        f"data_dir={data_dir}",
        "-t",
        "name=rebuilt",
        "-t",
        "start=true",
        "-t",
        f"lab_dir={lab_root / ('cli-' + tmp_path.name)}",
        "--json",
    ]
    restored = json.loads(cli(*args, check=True).stdout)
    server = EtcdServer.from_state(dict(restored["details"]["server"]))
    try:
        assert restored["verified"] and server.healthy()
        assert {c["name"] for c in restored["checks"]} >= {"hashkv", "key count equals the backup's"}
        again = json.loads(cli(*args, check=True).stdout)
        assert again["changed"] is False
    finally:
        server.stop()


def test_etcd_down_gives_one_line_and_no_backup(cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer) -> None:
    source = settings_of(etcd_scratch)
    _configure(cli, tmp_path, source)
    etcd_scratch.stop()
    started = time.monotonic()
    assert_clean_error(cli("backup"), 7, "etcd", "unreachable")
    assert time.monotonic() - started < 60
    assert json.loads(cli("list", "--json", check=True).stdout) == []


def test_kill_9_during_an_etcd_backup(cli: Cli, tmp_path: Path, etcd_source: EtcdServer) -> None:
    _configure(cli, tmp_path, settings_of(etcd_source))
    for delay in (0.2, 0.5, 0.8):
        proc = subprocess.Popen(
            [sys.executable, "-m", "drtool", "backup"],
            env=cli.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert all(b["status"] == "complete" for b in listed)
    assert json.loads(cli("check", "--json", check=True).stdout)["ok"]
    assert json.loads(cli("backup", "--json", check=True).stdout)["status"] == "complete"
