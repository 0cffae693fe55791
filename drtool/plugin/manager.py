"""Finding plugins: every entry point in the group ``drtool.plugins`` is a plugin class.

``DRTOOL_PLUGINS=etcd,files`` restricts which are loaded (useful to bisect a broken third-party one).
Loading happens on first use, never at import time, and a plugin that fails to load is reported by name
without taking the others down.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from functools import cache
from importlib.metadata import entry_points

from drtool.errors import NotFound, UsageError
from drtool.plugin.contract import Plugin

GROUP = "drtool.plugins"
log = logging.getLogger(__name__)


@dataclasses.dataclass
class Registry:
    plugins: dict[str, Plugin]
    broken: dict[str, str]  # entry-point name -> why it did not load


def _allowed() -> set[str]:
    """The plugins ``DRTOOL_PLUGINS`` restricts loading to; empty: every installed one."""
    return {p.strip() for p in os.environ.get("DRTOOL_PLUGINS", "").split(",") if p.strip()}


@cache
def registry() -> Registry:
    allowed = _allowed()
    found = Registry({}, {})
    for ep in entry_points(group=GROUP):
        if allowed and ep.name not in allowed:
            continue
        try:
            plugin = ep.load()()
        except Exception as exc:  # a third party's bug must not stop the other plugins
            found.broken[ep.name] = f"{ep.value} failed to load: {exc}"
            log.info("plugin %s failed to load: %s", ep.name, exc)
            continue
        if not isinstance(plugin, Plugin):
            found.broken[ep.name] = f"{ep.value} does not implement the plugin contract"
            continue
        found.plugins[plugin.name] = plugin
    log.debug("plugins loaded: %s", ", ".join(sorted(found.plugins)) or "none")
    return found


def load_plugins() -> dict[str, Plugin]:
    return registry().plugins


def get_plugin(name: str) -> Plugin:
    reg = registry()
    if name in reg.broken:
        raise UsageError(f"plugin {name}: {reg.broken[name]}", "fix or uninstall it, or exclude it with DRTOOL_PLUGINS")
    if name not in reg.plugins:
        raise NotFound(f"no plugin named {name!r}", f"installed plugins: {', '.join(sorted(reg.plugins)) or 'none'}")
    return reg.plugins[name]


def load_one(name: str) -> Plugin:
    """The plugin called ``name``, importing only its own entry point when one is named alike.

    A plan step's process (or `drtool backup -p`, `drtool restore`) needs one plugin; loading every installed
    one (the Kubernetes client, boto3, ...) would add their imports to every step. ``DRTOOL_PLUGINS`` still
    decides: a plugin it leaves out is not loaded here either.
    """
    allowed = _allowed()
    for ep in entry_points(group=GROUP, name=name) if not allowed or name in allowed else ():
        try:
            plugin = ep.load()()
        except Exception:
            break  # get_plugin reports it the usual way
        if isinstance(plugin, Plugin) and plugin.name == name:
            return plugin
    return get_plugin(name)
