"""tests/fixtures/schedule.py: tests/run.sh's workers get the longest test files first, each file whole."""

from __future__ import annotations

import types
from pathlib import Path

from tests.fixtures.schedule import SECONDS, pytest_collection_modifyitems

ROOT = Path(__file__).parents[2]


def test_every_file_the_schedule_times_exists() -> None:
    """A renamed or moved file would silently lose its place at the head of the queue."""
    assert [path for path in SECONDS if not (ROOT / path).is_file()] == []


def _items(*nodeids: str) -> list[types.SimpleNamespace]:
    return [types.SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_a_worker_runs_the_longest_files_first_each_file_in_its_own_order() -> None:
    collected = _items(
        "tests/unit/test_keys.py::test_a",
        "tests/e2e/test_crash_drills.py::test_kill",
        "tests/unit/test_keys.py::test_b",
        "tests/e2e/test_fresh_clone.py::test_demo",
        "tests/plans_rehearsal/test_living_restore.py::test_b",
        "tests/plans_rehearsal/test_living_restore.py::test_a",
    )
    items = list(collected)
    pytest_collection_modifyitems(types.SimpleNamespace(workerinput={}), items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/e2e/test_fresh_clone.py::test_demo",
        "tests/plans_rehearsal/test_living_restore.py::test_b",
        "tests/plans_rehearsal/test_living_restore.py::test_a",
        "tests/e2e/test_crash_drills.py::test_kill",
        "tests/unit/test_keys.py::test_a",
        "tests/unit/test_keys.py::test_b",
    ]
    serial = list(collected)  # without xdist the collection order stays
    pytest_collection_modifyitems(types.SimpleNamespace(), serial)  # type: ignore[arg-type]
    assert serial == collected
