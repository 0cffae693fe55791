"""The test harness's warm `drtool` (tests/fixtures/warm_cli.py) prints and exits exactly as a fresh
interpreter does, reads the run's environment, and starts a plain interpreter where a fork would differ."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures import core, warm_cli
from tests.fixtures.core import Cli


def _both(cli: Cli, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    warm = cli(*args)
    monkeypatch.setattr(core, "WARM", False)
    cold = cli(*args)
    monkeypatch.setattr(core, "WARM", True)
    return warm, cold


@pytest.mark.parametrize("args", [("--help",), ("list",), ("no-such-command",), ("plan", "validate", "/nonexistent")])
def test_a_warm_run_prints_and_exits_as_a_fresh_interpreter(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    warm, cold = _both(cli, monkeypatch, *args)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_warm_run_reads_the_runs_environment_and_folder(cli: Cli, tmp_path: Path) -> None:
    """The store comes from the run's DRTOOL_STORE and HOME; a second HOME sees nothing of the first."""
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    assert cli("list", "--json", env={"DRTOOL_STORE": str(store)}, check=True).stdout.strip() == "[]"
    other = Cli(tmp_path / "other-home")
    other.home.mkdir()
    assert other("list").returncode != 0  # no store configured in that HOME


def test_a_run_with_another_import_time_environment_gets_its_own_server(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # from no server, whatever this worker's earlier test files started (up to MAX_SERVERS: then a run is cold)
    monkeypatch.setattr(warm_cli, "_servers", {})
    first = warm_cli.for_run(cli.env)
    narrow = warm_cli.for_run({**cli.env, "COLUMNS": "60"})
    assert first is not None and narrow is not None and first is not narrow
    assert warm_cli.for_run(dict(cli.env)) is first  # (both stopped at exit, as every server: atexit)
