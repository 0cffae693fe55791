"""How the images plugin's source and target stand up in a lab: one registry each, seeded with sample.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drtool_lab.oci import lab_registry
from drtool_plugins.images.sample import seed_registry

from drtool.plugin.toolkit.oci.registry import Registry

if TYPE_CHECKING:
    from drtool_lab.lab import Lab


class ImagesLab:
    """``LabSupport`` for the images plugin."""

    kinds = ("registry",)

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        server = lab_registry(lab)
        pushed = seed_registry(Registry(server.host), scale)
        refs = [f"{server.host}/{p.repository}:{p.tag}" for p in pushed.values() if p.tag]
        return {"images": refs}

    def target(self, lab: Lab) -> dict[str, Any]:
        return {"registry": lab_registry(lab).host}
