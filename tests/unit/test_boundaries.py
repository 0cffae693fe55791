"""The import graph keeps its shape (docs/architecture.md): read with ``ast``, so nothing is imported to check."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).parents[2]
PLUGINS = ROOT / "plugins"


def _imports(path: Path, package: str) -> Iterator[str]:
    """Every module ``path`` imports at run time, anywhere in it (``if TYPE_CHECKING:`` blocks left out),
    relative imports made absolute (``package`` is the file's package)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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


# Modules whose job is the lab: standing servers up, seeding them, rehearsing into them.
LAB_SIDE = (
    "drtool/lab/",
    "drtool/rehearsal/",
    "drtool/demo/",
    "drtool/cli/lab_cmds.py",
    "drtool/cli/rehearse_cmd.py",
)
# Production features that run a server through the lab's process supervision, importing it only when used.
LAB_BACKED = {
    "plugins/etcd/restore.py": "target start: true (and a PITR's replay member) runs etcd as the lab's EtcdServer",
    "plugins/vault/snapshot.py": "the trial restore runs a throwaway OpenBaoServer",
    "plugins/checkpoints/location.py": "a `lab:` location reads a lab's MinIO credentials",
}


def test_production_code_does_not_import_the_lab() -> None:
    """Binaries come from drtool/binaries.py; only lab support (``lab.py``) and the features above touch the lab."""
    found = []
    for root, name in ((ROOT / "drtool", "drtool"), (PLUGINS, "drtool_plugins")):
        for path in sorted(root.rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if where.startswith(LAB_SIDE) or path.name == "lab.py" or where in LAB_BACKED:
                continue
            found += [
                f"{where} imports {m}" for m in _imports(path, _package(path, root, name)) if m.startswith("drtool.lab")
            ]
    assert not found, found
