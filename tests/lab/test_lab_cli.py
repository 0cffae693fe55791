"""`drtool lab` from the command line: servers outlive the command that started them."""

from __future__ import annotations

import json
import stat
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.core import Cli, assert_clean_error


@pytest.mark.e2e  # `drtool lab up` starts etcd
def test_up_status_env_down(cli: Cli, tmp_path: Path) -> None:
    cli.env["DRTOOL_LAB_DIR"] = str(tmp_path / "labs")
    cli("lab", "up", "--name", "clitest", check=True)
    state_file = tmp_path / "labs" / "clitest" / "lab.json"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    try:
        env = dict(
            line.removeprefix("export ").split("=", 1)
            for line in cli("lab", "env", "clitest", check=True).stdout.splitlines()
        )
        with urllib.request.urlopen(env["ETCD_ENDPOINTS"] + "/health", timeout=5) as resp:
            assert json.load(resp)["health"] == "true"
        status = cli("lab", "status", check=True, env={"COLUMNS": "200"}).stdout
        assert "clitest" in status
        for kind in ("kube-controller-manager", "kube-scheduler", "kwok", "kueue", "cert-manager"):  # living
            assert f"│ {kind} " in status and "down" not in status, status
    finally:
        cli("lab", "down", "clitest", check=True)
    assert not state_file.exists()
    assert_clean_error(cli("lab", "env", "clitest"), 6, "no lab named")
    assert_clean_error(cli("lab", "up", "--name", "Bad_Name"), 2, "invalid lab name")
