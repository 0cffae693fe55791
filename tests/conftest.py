"""Shared test set-up: every real server comes from ``drtool_lab``, started on free loopback ports."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from drtool_lab.build import cache_dir
from drtool_lab.gorun import go_executable

from drtool.errors import SourceError

pytest_plugins = [
    "tests.fixtures.core",
    "tests.fixtures.etcd",
    "tests.fixtures.minio",
    "tests.fixtures.postgres",
    "tests.fixtures.kube",
    "tests.fixtures.bind9",
    "tests.fixtures.git_server",
    "tests.fixtures.openbao",
    "tests.fixtures.registry",
    "tests.fixtures.faults",
    "tests.fixtures.mlflow",
    "tests.fixtures.tiers",
    "tests.fixtures.schedule",
    "tests.fixtures.drills",
    "tests.fixtures.hints",
    "tests.fixtures.cpu_log",
]


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Labs started by tests live under the test's temp dir, never in the user's own lab folder."""
    root = tmp_path_factory.mktemp("labs")
    os.environ["DRTOOL_LAB_DIR"] = str(root)
    return root


@pytest.fixture(scope="session", autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Pins of the stores tests open (drtool/repo/pins.py) go under the session's temp dir, child processes
    included, never into the user's ~/.local/state; a test of a machine that has never seen a store
    passes a DRTOOL_STATE_DIR of its own."""
    before = os.environ.get("DRTOOL_STATE_DIR")
    os.environ["DRTOOL_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("DRTOOL_STATE_DIR", None)
    else:
        os.environ["DRTOOL_STATE_DIR"] = before


@pytest.fixture(scope="session", autouse=True)
def shared_binary_cache() -> Iterator[None]:
    """Pin DRTOOL_CACHE and Go's module cache to this user's for the whole session, child processes included.

    `drtool lab up` starts kube-apiserver by default, and the CLI tests run drtool with a temporary HOME:
    without this, ``~/.cache/drtool`` would point into that HOME and each such test would rebuild
    kube-apiserver from scratch (minutes, 2.4 GB) instead of reusing the binary CI built once. The living
    lab reads Kueue's CRDs and webhooks and kwok's stages from Go's module cache (``~/go/pkg/mod``): in a
    temporary HOME that is empty, and a rehearsal's target lab starts in a network namespace without the
    module proxy.
    """
    pinned = {"DRTOOL_CACHE": str(cache_dir()), "GOMODCACHE": _go_module_cache()}
    before = {name: os.environ.get(name) for name in pinned}
    os.environ.update({name: value for name, value in pinned.items() if value})
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _go_module_cache() -> str:
    """``go env GOMODCACHE`` for this user ("" without Go: the lab's own error then says what is missing)."""
    try:
        go = go_executable()
        out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60, check=True)
    except (SourceError, OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()
