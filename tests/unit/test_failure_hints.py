"""A failing test's DrtoolError hint shows in pytest's report (the server log's tail of a lab server that
exited while starting: a CI failure showed only "exited while starting"). A real pytest run in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FAILING = """
import pytest
from drtool.errors import SourceError, UsageError

@pytest.fixture
def server():
    raise SourceError("cert-manager exited while starting", "E1206 bind: address already in use")

def test_setup_fails(server):
    pass

def test_call_fails():
    try:
        raise UsageError("inner", "the inner hint")
    except UsageError as exc:
        raise RuntimeError("wrapped") from exc

def test_no_hint():
    raise UsageError("no hint here")
"""


def test_the_hint_of_a_failing_tests_drtool_error_is_a_report_section(tmp_path: Path) -> None:
    (tmp_path / "test_failing.py").write_text(FAILING)
    repo = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.fixtures.hints"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # no xdist, hypothesis, ...: a second less
    run = subprocess.run([*argv, str(tmp_path)], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    out = run.stdout
    assert out.count("drtool hint") == 2, out
    assert "E1206 bind: address already in use" in out and "the inner hint" in out
    assert "1 error" in out and "2 failed" in out
