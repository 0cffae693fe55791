"""Meta-tests: every installed plugin keeps the contract and is documented where authors look."""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from drtool.plugin import contract
from drtool.plugin.manager import GROUP, registry

DOCS = (Path(__file__).parents[1] / "docs" / "plugins.md").read_text()
BUILT_IN = sorted(ep.name for ep in entry_points(group=GROUP) if ep.value.startswith("drtool_plugins."))


def test_built_in_plugins_load() -> None:
    reg = registry()
    assert not reg.broken, reg.broken
    assert {"etcd", "files"} <= set(reg.plugins)


@pytest.mark.parametrize("name", BUILT_IN)
def test_plugin_keeps_the_contract(name: str) -> None:
    plugin = registry().plugins[name]
    assert isinstance(plugin, contract.Plugin)
    assert plugin.name == name and plugin.description
    for method in ("discover", "backup", "restore", "verify", "dependencies"):
        expected = list(inspect.signature(getattr(contract.Plugin, method)).parameters)[1:]
        actual = list(inspect.signature(getattr(plugin, method)).parameters)
        assert actual == expected, (name, method, actual)
    assert f"`{name}`" in DOCS, f"docs/plugins.md does not describe the {name} plugin"


def test_every_contract_method_is_documented() -> None:
    for method in ("discover", "backup", "restore", "verify", "dependencies"):
        assert f"def {method}(" in DOCS
