"""A lab's OCI registry, for the plugins whose lab source or target is one (images, helm)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drtool_lab.components.registry import RegistryServer

if TYPE_CHECKING:
    from drtool_lab.lab import Lab


def lab_registry(lab: Lab) -> RegistryServer:
    """The lab's registry, started if it is not running."""
    lab.up(["registry"])
    server = lab.first("registry")
    assert isinstance(server, RegistryServer)
    return server
