"""Shared test set-up: every real server comes from ``drtool.lab``, started on free loopback ports."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from drtool.lab.build import cache_dir

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
    """Pin DRTOOL_CACHE to this user's cache for the whole session, child processes included.

    `drtool lab up` starts kube-apiserver by default, and the CLI tests run drtool with a temporary HOME:
    without this, ``~/.cache/drtool`` would point into that HOME and each such test would rebuild
    kube-apiserver from scratch (minutes, 2.4 GB) instead of reusing the binary CI built once.
    """
    before = os.environ.get("DRTOOL_CACHE")
    os.environ["DRTOOL_CACHE"] = str(cache_dir())
    yield
    if before is None:
        os.environ.pop("DRTOOL_CACHE", None)
    else:
        os.environ["DRTOOL_CACHE"] = before
