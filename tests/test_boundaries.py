"""The import graph keeps its shape (docs/architecture.md): read with ``ast``, so nothing is imported to check."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[1]
PLUGINS = ROOT / "plugins"


def _imports(path: Path, package: str) -> Iterator[str]:
    """Every module ``path`` imports, relative imports made absolute (``package`` is the file's package)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                yield ".".join([*base, node.module] if node.module else base)
            else:
                yield node.module or ""


def _package(path: Path, root: Path, name: str) -> str:
    """The package a file's relative imports start from (``__init__.py`` is its own package's)."""
    return ".".join((name, *path.relative_to(root).parent.parts))


def test_no_plugin_imports_another_plugin() -> None:
    crossings = []
    for path in sorted(PLUGINS.rglob("*.py")):
        own = path.relative_to(PLUGINS).parts[0]
        for module in _imports(path, _package(path, PLUGINS, "drtool_plugins")):
            parts = module.split(".")
            if parts[0] == "drtool_plugins" and len(parts) > 1 and parts[1] != own:
                crossings.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not crossings, "plugins share code through drtool/plugin/toolkit/, not each other:\n" + "\n".join(crossings)


def test_the_core_never_imports_a_plugin() -> None:
    found = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "drtool").rglob("*.py"))
        for module in _imports(path, _package(path, ROOT / "drtool", "drtool"))
        if module.startswith("drtool_plugins")
    ]
    assert not found, found
