"""The import graph keeps its shape (docs/architecture.md): read with ``ast``, so nothing is imported to check."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from drtool.layers import LAYERS, ROOTS, layer_of, member_of, render

ROOT = Path(__file__).parents[2]
PLUGINS = ROOT / "plugins"


def _located(path: Path, package: str, typing: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in ``path``, anywhere in it (inside functions too; ``if TYPE_CHECKING:``
    blocks only when ``typing``), relative imports made absolute (``package`` is the file's package).
    ``from a import b`` names ``a.b`` when that is a module of the checkout, else ``a``."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            named = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in MODULES]
            yield from ((node.lineno, m) for m in named or [module])


def _imports(path: Path, package: str) -> Iterator[str]:
    """Every module ``path`` imports at run time."""
    return (module for _, module in _located(path, package))


def _package(path: Path, root: Path, name: str) -> str:
    """The package a file's relative imports start from (``__init__.py`` is its own package's)."""
    return ".".join((name, *path.relative_to(root).parent.parts))


def _modules() -> dict[str, tuple[Path, str]]:
    """Every module of the checkout's import roots: name -> (file, the package its relative imports start from)."""
    found = {}
    for name, folder in ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            module = ".".join((name, *(parts[:-1] if parts[-1] == "__init__" else parts)))
            found[module] = (path, _package(path, ROOT / folder, name))
    return found


MODULES = _modules()


def _unit(module: str) -> str | None:
    """The node of the package graph a module belongs to: its table entry, each plugin a node of its own."""
    member = member_of(module)
    if member == "drtool_plugins" and module.count("."):
        return ".".join(module.split(".")[:2])
    return member


def test_every_module_has_a_layer_and_every_entry_a_module() -> None:
    """A new top-level package or module is placed in drtool/layers.py before anything can import it."""
    unplaced = sorted(m for m in MODULES if layer_of(m) is None)
    assert not unplaced, f"not in drtool/layers.py's LAYERS: {unplaced}"
    stale = sorted(m for layer in LAYERS for m in layer.members if m not in MODULES)
    assert not stale, f"drtool/layers.py names what does not exist: {stale}"


def test_every_relative_import_names_a_module() -> None:
    """``from .. import x`` must name a module: after a package moves, a stale one would name nothing."""
    broken = []
    for path, package in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
                missing = [a.name for a in node.names if not node.module and f"{origin}.{a.name}" not in MODULES]
                if origin not in MODULES or missing:
                    broken.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {origin} {missing or ''}")
    assert not broken, broken


def test_no_import_points_up() -> None:
    """Every import, lazy and type-only ones too, goes to the importer's own layer or one below it."""
    upward = []
    for module, (path, package) in MODULES.items():
        here = layer_of(module)
        assert here is not None
        for line, imported in _located(path, package, typing=True):
            there = layer_of(imported)
            if there is not None and there > here:
                upward.append(
                    f"{path.relative_to(ROOT)}:{line} ({LAYERS[here].name}) imports {imported} ({LAYERS[there].name})"
                )
    assert not upward, "imports that point up a layer (drtool/layers.py):\n" + "\n".join(upward)


def test_no_package_cycle() -> None:
    """No two top-level packages or modules import each other, even through others (each plugin is one)."""
    graph: dict[str, set[str]] = {}
    for module, (path, package) in MODULES.items():
        unit = _unit(module)
        assert unit is not None
        targets = {_unit(imported) for _, imported in _located(path, package, typing=True)}
        graph.setdefault(unit, set()).update(t for t in targets if t is not None and t != unit)
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"packages import each other: {' -> '.join(exc.args[1])}") from None


def test_the_architecture_page_shows_the_layer_table() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert render(ROOT) in page, "run `python -m drtool.layers --write docs/architecture.md`"


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


def test_no_import_loop_in_repo() -> None:
    """The store layer imports downwards only: sessions take a repository, the repository knows no session."""
    repo_dir = ROOT / "drtool" / "repo"
    modules = {f"drtool.repo.{p.stem}": p for p in repo_dir.glob("*.py") if p.stem != "__init__"}
    graph = {
        name: {m for m in _imports(path, "drtool.repo") if m in modules and m != name} for name, path in modules.items()
    }
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import loop in drtool/repo: {' -> '.join(exc.args[1])}") from None


def test_production_code_does_not_import_the_lab() -> None:
    """Nothing outside lab/ imports it, lazily or for types only, and no exception is made: production's own
    servers (a restored etcd, a trial OpenBao) are drtool.servers; the lab finds each plugin's support itself."""
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {imported}"
        for module, (path, package) in MODULES.items()
        if not module.startswith("drtool_lab")
        for line, imported in _located(path, package, typing=True)
        if imported.split(".")[0] == "drtool_lab"
    ]
    assert not found, found
