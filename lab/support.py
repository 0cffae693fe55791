"""Each plugin's lab support: how its source is stood up in a lab, found through the ``drtool.lab`` group.

A plugin ships its lab support beside the lab, never inside the plugin: ``lab/plugins/NAME.py`` (import name
``drtool_lab.plugins.NAME``), registered as ``NAME = "drtool_lab.plugins.NAME:Support"`` in the ``drtool.lab``
entry-point group, the entry named like the plugin (docs/plugins.md, "Lab support"). The demo, `drtool lab
seed`, rehearsals into a fresh lab and the tests all use it, so a plugin with lab support joins the whole story
(seed, back up, restore into a fresh lab, verify). The product never imports it: the container image has no
lab.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from drtool_lab.lab import Lab

GROUP = "drtool.lab"


@runtime_checkable
class LabSupport(Protocol):
    """How one plugin's source is stood up in a lab, and an empty target made for its restore."""

    kinds: tuple[str, ...]  # lab component kinds the plugin's source and target need running
    # A support may also set ``target_kinds``: the kinds a fresh target lab may start for it, side by side
    # with the other plugins' servers, before ``target`` runs (default ``kinds``; see ``target_kinds`` below).

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        """Start what is needed in ``lab``, fill it with realistic content, return the backup source mapping."""
        ...

    def target(self, lab: Lab) -> dict[str, Any]:
        """Start what is needed in an empty ``lab``; return the restore target mapping pointing at it."""
        ...


def target_kinds(support: LabSupport) -> tuple[str, ...]:
    """The kinds a target lab starts for ``support`` before its ``target`` runs: ``kinds`` unless the support
    says fewer, because its target must start a server its own way (an uninitialized OpenBao) or none at all
    (an etcd restore starts its new member)."""
    return tuple(getattr(support, "target_kinds", support.kinds))


@cache
def lab_support(plugin: str) -> LabSupport | None:
    """The lab support registered for the plugin named ``plugin`` (only its own entry is imported), if any."""
    for ep in entry_points(group=GROUP, name=plugin):
        support = ep.load()()
        if isinstance(support, LabSupport):
            return support
    return None
