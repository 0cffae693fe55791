"""`drtool standby`, `failover` and `failback` refuse bad input in one line, before touching a store or a
cluster (docs/standby.md)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.core import Cli, assert_clean_error


def test_failover_needs_approval(cli: Cli, tmp_path: Path) -> None:
    proc = cli("--store", str(tmp_path / "none"), "failover", "--set", "prod", "--target", str(tmp_path / "k"))
    assert_clean_error(proc, 11, "takes service over", "--approve")


def test_standby_names_a_missing_kubeconfig(cli: Cli, tmp_path: Path) -> None:
    proc = cli("--store", str(tmp_path / "none"), "standby", "--set", "prod", "--target", str(tmp_path / "k"))
    assert_clean_error(proc, 2, "no kubeconfig at")


def test_a_plugin_without_standby_hooks_is_refused(cli: Cli, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "k"
    kubeconfig.write_text("apiVersion: v1\n")
    cli("init", "--store", str(tmp_path / "store"), check=True)
    proc = cli("--store", str(tmp_path / "store"), "standby", "--set", "prod", "--target", str(kubeconfig), "-p", "git")
    assert_clean_error(proc, 2, "plugin git cannot keep a standby")
