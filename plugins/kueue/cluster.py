"""One Kubernetes API server as the kueue plugin sees it, through the toolkit's Kubernetes client and discovery.

Kueue's objects are read in their CRD's storage version (``v1beta2`` for the CRDs of Kueue v0.17 the lab
installs, which serve ``v1beta1`` too), as the kubernetes plugin reads every custom
resource: the storage version is what etcd holds, so neither a backup nor a restore needs Kueue's
conversion webhook — which in a freshly rebuilt cluster is not running yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import CrdInfo, ResourceType, crd_index, discover
from drtool.kube.settings import Connection

from .kinds import GROUP

Obj = dict[str, Any]


def connect(settings: Mapping[str, Any]) -> KubeClient:
    """``kubeconfig`` and ``context`` (default $KUBECONFIG), as the kubernetes plugin takes them."""
    return KubeClient(Connection.from_mapping(settings))


@dataclasses.dataclass(frozen=True)
class Served:
    """What one API server serves: every type (by ``resource.group``) and every CRD."""

    types: Mapping[str, ResourceType]
    crds: Mapping[tuple[str, str], CrdInfo]

    def kueue(self) -> dict[str, ResourceType]:
        return {k: t for k, t in self.types.items() if t.group == GROUP}

    def serves(self, t: ResourceType) -> bool:
        """Whether objects of ``t`` can be written here in ``t``'s version (the backup's)."""
        if not t.crd:
            return t.key in self.types
        info = self.crds.get((t.group, t.resource))
        return info is not None and t.version in info.served

    def versions(self, t: ResourceType) -> tuple[str, ...]:
        info = self.crds.get((t.group, t.resource))
        return info.served if info else ()


def served(client: KubeClient) -> Served:
    crds = crd_index(client)
    types, _stale = discover(client, crds)
    return Served({t.key: t for t in types}, crds)


def list_objects(client: KubeClient, t: ResourceType, namespace: str | None = None) -> list[Obj]:
    """Every object of ``t`` (optionally in one namespace), paged. Kueue configuration is small."""
    out: list[Obj] = []
    try:
        for page in client.list_pages(t.path(namespace)):
            out += page.get("items") or []
    except ApiError as exc:
        raise SourceError(f"listing {t.key}: {exc.message}", exc.hint) from None
    return out


def require_kueue(found: Mapping[str, ResourceType], server: str) -> None:
    if not found:
        raise SourceError(
            f"{server} serves no {GROUP} resources",
            "install Kueue (or at least its CRDs) in that cluster, or check the kubeconfig",
        )
