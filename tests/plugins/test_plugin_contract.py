"""Meta-tests: every installed plugin keeps the contract and is documented where authors look."""

from __future__ import annotations

import inspect
import typing
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from drtool.plugin import contract
from drtool.plugin.manager import GROUP, registry

DOCS = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
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
    for method in ("discover", "backup", "restore", "verify", "dependencies", "diff", "follow", "fold"):
        assert f"def {method}(" in DOCS


def test_a_plugin_states_only_what_it_has() -> None:
    """The optional hooks have defaults: a plugin without them still keeps the contract."""

    class Minimal(contract.BasePlugin):
        name, description = "minimal", "only the required hooks"
        backup = restore = verify = staticmethod(lambda *args: None)

    plugin = Minimal()
    assert isinstance(plugin, contract.Plugin) and not isinstance(plugin, contract.DiffSupport)
    assert not isinstance(plugin, contract.FollowSupport)
    assert plugin.dependencies(None, {}) == [] and plugin.discover({}).counts == {}  # type: ignore[arg-type]
    assert not hasattr(plugin, "lab")  # lab support lives in the lab (drtool_lab.support), not in the contract
    assert plugin.schema is None and plugin.platform_checks() == () and not plugin.restores_cluster


DIFFERS = sorted(name for name in BUILT_IN if isinstance(registry().plugins[name], contract.DiffSupport))


def test_some_plugin_offers_diff() -> None:
    assert "kueue" in DIFFERS


@pytest.mark.parametrize("name", DIFFERS)
def test_diff_keeps_the_contract(name: str) -> None:
    """``diff`` takes what ``DiffSupport.diff`` takes and returns what `drtool diff` prints."""
    plugin = registry().plugins[name]
    expected = list(inspect.signature(contract.DiffSupport.diff).parameters)[1:]
    assert list(inspect.signature(plugin.diff).parameters) == expected
    returned = typing.get_type_hints(plugin.diff)["return"]
    for member in ("equal", "summary", "tables", "to_json"):
        assert hasattr(returned, member) or member in typing.get_type_hints(returned), (name, member)
    assert f"`{name}`" in DOCS.split("### diff", 1)[1], f"docs/plugins.md does not name {name} under diff"


FOLLOWERS = sorted(name for name in BUILT_IN if isinstance(registry().plugins[name], contract.FollowSupport))


def test_some_plugin_follows_a_log() -> None:
    assert FOLLOWERS == ["etcd", "kubernetes", "kueue"]


STANDBYS = sorted(name for name in BUILT_IN if isinstance(registry().plugins[name], contract.StandbySupport))


@pytest.mark.parametrize("name", STANDBYS)
def test_standby_hooks_keep_the_contract(name: str) -> None:
    """``hydrate``, ``settle`` and ``release`` take what ``StandbySupport`` says; only a follower has them (a
    standby hydrates from a chain), and the docs name the plugin under "standby"."""
    plugin = registry().plugins[name]
    assert name in FOLLOWERS
    for method in ("hydrate", "settle", "release"):
        expected = list(inspect.signature(getattr(contract.StandbySupport, method)).parameters)[1:]
        assert list(inspect.signature(getattr(plugin, method)).parameters) == expected, (name, method)
    documented = DOCS.split("### standby", 1)[1].split("\n## ", 1)[0]
    assert f"`{name}`" in documented, f"docs/plugins.md does not name {name} under standby"


def test_the_kubernetes_plugins_keep_a_standby() -> None:
    assert STANDBYS == ["kubernetes", "kueue"]


@pytest.mark.parametrize("name", FOLLOWERS)
def test_follow_and_fold_keep_the_contract(name: str) -> None:
    """``follow`` and ``fold`` take what ``FollowSupport`` says, and the docs name the plugin under them."""
    plugin = registry().plugins[name]
    for method in ("follow", "fold"):
        expected = list(inspect.signature(getattr(contract.FollowSupport, method)).parameters)[1:]
        assert list(inspect.signature(getattr(plugin, method)).parameters) == expected, (name, method)
    documented = DOCS.split("### follow and fold", 1)[1].split("\n## ", 1)[0]
    assert f"`{name}`" in documented, f"docs/plugins.md does not name {name} under follow and fold"
