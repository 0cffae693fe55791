"""What a plan does about a reference into the failed cluster: the step that rewrites or rebuilds it.

A finding inside the failure domain is **remediated** when the plan itself takes the restored platform off
it, and the report names the step and how:

- the plan's ``transforms: image-registries`` (drtool.kube.transforms), and ``image_registry_map`` (a
  kubernetes step option or target setting, docs/images.md): restored workloads pull from the mapped
  registry, so an image registry it maps is no longer pulled from (``transforms: namespaces`` moves
  Services as ``namespace_map`` does);
- a plugin's restore that rewrites the field (``Field.rewritten``: model-registry version sources point at
  the target's artifact root);
- a cluster Service name whose Service a step of the plan restores: in the new cluster the name resolves to
  the restored Service. ``namespace_map`` moves Services, so a name is remediated where the Service will
  be (``svc.team-a-dr.svc`` after ``team-a=team-a-dr``); the old name is not, and the note says why;
- ``cutover`` of a dns-certs step (docs/dns-certs.md): a DNS record that points at an old load balancer is
  written pointing at its replacement; and a name the old cluster served (an Ingress host), once every
  record of that name pointing at an old load balancer is re-pointed, leads to the new cluster (an SRV
  record or a URL naming it is remediated too).

Image registries are never remediated by a restored Service: a node's container runtime resolves registry
names with the node's resolver, not the cluster's DNS. A webhook that blocks the restore is not either: its
Service exists only after the objects it guards have been written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from drtool.independence.finder import ServiceKey
from drtool.plans.schema import Plan
from drtool.plugin.manager import load_plugins

IMAGE_REGISTRY = "container image registry"
CUTOVER_PURPOSE = "DNS record "


def cutover_record_name(purpose: str) -> str:
    """The owner name of a cut-over record finding (``DNS record <name> <TYPE> <value> points at ...``)."""
    return purpose.removeprefix(CUTOVER_PURPOSE).split(" ", 1)[0].rstrip(".").lower()


@dataclasses.dataclass(frozen=True)
class Remedy:
    step: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def pairs(value: Any) -> dict[str, str]:
    """``old=new[,old2=new2]`` or a mapping, as the plugins take maps (malformed entries are theirs to refuse)."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = value if isinstance(value, list | tuple) else str(value or "").split(",")
    out = {}
    for item in items:
        old, sep, new = str(item).partition("=")
        if sep and old.strip() and new.strip():
            out[old.strip()] = new.strip()
    return out


class Remedies:
    """The remediations of one plan, given each step's target and the Services each plugin's backup holds."""

    def __init__(
        self,
        plan: Plan,
        targets: Mapping[str, Mapping[str, Any]],
        services: Mapping[str, Iterable[ServiceKey]],
        steps: Iterable[str],
    ) -> None:
        analysed = set(steps)
        plugins = load_plugins()
        self._settings = {
            s.id: {
                **targets.get(s.id, {}),
                **plan.options_for(s, getattr(plugins.get(s.uses), "takes_transforms", False)),
            }
            for s in plan.steps
            if s.id in analysed
        }  # options win over the target, as the plugins merge them
        self._restored: dict[ServiceKey, tuple[str, ServiceKey]] = {}  # where a Service will be -> step, origin
        self._moved: dict[ServiceKey, tuple[str, ServiceKey]] = {}  # a Service that namespace_map moves
        for step in plan.steps:
            if step.id not in analysed:
                continue
            ns_map = {**pairs(self._settings[step.id].get("namespace_map")), **self._transform(step.id, "namespaces")}
            for ns, name in services.get(step.uses, ()):
                placed = (ns_map.get(ns, ns), name)
                self._restored.setdefault(placed, (step.id, (ns, name)))
                if placed != (ns, name):
                    self._moved[(ns, name)] = (step.id, placed)

    def _transform(self, step: str, kind: str) -> dict[str, str]:
        """One map of the plan's ``transforms:`` as the step's plugin receives it ({} when it takes none)."""
        return pairs((self._settings.get(step, {}).get("transforms") or {}).get(kind))

    def for_image(self, registry: str, steps: Iterable[str]) -> Remedy | None:
        for step in steps:
            new = self._transform(step, "image-registries").get(registry)
            if new:
                return Remedy(step, f"transform image-registries points {registry} at {new}")
        found = self._mapped("image_registry_map", registry, steps)
        return Remedy(found[0], f"image_registry_map points {registry} at {found[1]}") if found else None

    def for_cutover(self, address: str, steps: Iterable[str]) -> Remedy | None:
        found = self._mapped("cutover", address, steps)
        return Remedy(found[0], f"cutover re-points the record from {address} to {found[1]}") if found else None

    def _mapped(self, option: str, old: str, steps: Iterable[str]) -> tuple[str, str] | None:
        """(step, new) for the first of ``steps`` whose ``option`` map names ``old``."""
        for step in steps:
            new = pairs(self._settings.get(step, {}).get(option)).get(old)
            if new:
                return step, new
        return None

    def for_service(self, key: ServiceKey) -> tuple[Remedy | None, str]:
        """(the remedy, or None with a note when namespace_map moves the Service away from this name)."""
        if key in self._restored:
            step, origin = self._restored[key]
            moved = f" as {key[0]}/{key[1]} (namespace_map)" if origin != key else ""
            how = f"Service {origin[0]}/{origin[1]} is restored{moved}: in the new cluster the name resolves to it"
            return Remedy(step, how), ""
        if key in self._moved:
            step, placed = self._moved[key]
            where = f"{placed[0]}/{placed[1]}"
            return None, f"namespace_map of step {step} restores this Service as {where}: this name will not resolve"
        return None, ""
