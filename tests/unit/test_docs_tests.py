"""Every test the docs name exists: a guarantee that names a test nobody runs guarantees nothing.

docs/threat-model.md and the other pages cite tests as ``tests/<folder>/test_x.py::test_name`` and, after
the first, as ``::test_name``. A rename or a move that leaves a page behind fails here, not in a review.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parents[2]
FULL = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
SHORT = re.compile(r"(?<![\w/.])::(test_\w+)")


@cache
def defined_in(path: Path) -> frozenset[str]:
    """The test functions (and classes) a file defines, parametrized or not."""
    tree = ast.parse(path.read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))


def all_test_names() -> frozenset[str]:
    return frozenset().union(*(defined_in(p) for p in (ROOT / "tests").rglob("test_*.py")))


def cited() -> list[tuple[str, str, str]]:
    """(page, file or "", test name) for every citation in docs/ and the README."""
    found = []
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        text = page.read_text()
        found += [(page.name, file, name) for file, name in FULL.findall(text)]
        found += [(page.name, "", name) for name in SHORT.findall(text)]
    return found


def test_the_docs_cite_tests() -> None:
    assert len(cited()) > 50  # the pattern still matches how the pages cite


def test_every_test_the_docs_name_exists() -> None:
    names = all_test_names()
    missing = []
    for page, file, name in cited():
        if file:
            path = ROOT / file
            if not path.is_file() or name not in defined_in(path):
                missing.append(f"{page}: {file}::{name}")
        elif name not in names:
            missing.append(f"{page}: ::{name}")
    assert not missing, "\n".join(missing)
