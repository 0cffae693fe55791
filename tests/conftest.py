"""Shared test set-up: every real server comes from ``drtool.lab``, started on free loopback ports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.core",
]

for _optional in ("tests.fixtures.etcd", "tests.fixtures.minio", "tests.fixtures.postgres"):
    if (Path(__file__).parent / "fixtures" / (_optional.rsplit(".", 1)[1] + ".py")).exists():
        pytest_plugins.append(_optional)


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Labs started by tests live under the test's temp dir, never in the user's own lab folder."""
    root = tmp_path_factory.mktemp("labs")
    os.environ["DRTOOL_LAB_DIR"] = str(root)
    return root
