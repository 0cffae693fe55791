"""What an API server serves: every group, version and resource, and which of them are custom resources.

Aggregated discovery (``apidiscovery.k8s.io/v2``, two requests for the whole server) is used when the
server offers it; older servers get the legacy walk (one request per group version). Each resource is
read in ONE version: custom resources in their CRD's storage version (what etcd holds, so a restore
needs no conversion webhook, which will not be running yet in a new cluster), built-ins in the group's
preferred version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

from .client import ApiError, KubeClient

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# type keys (``resource.group``) every Kubernetes-reading plugin names
CRDS = "customresourcedefinitions.apiextensions.k8s.io"
NAMESPACES = "namespaces"
SECRETS = "secrets"


@dataclasses.dataclass(frozen=True)
class ResourceType:
    """One listable resource of one group, in the version it is backed up in."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()
    status: bool = False  # has a /status subresource
    crd: bool = False  # served by a CustomResourceDefinition
    storage_version: str | None = None  # for custom resources

    @property
    def key(self) -> str:
        """``resource.group`` (``configmaps`` for the core group): how filters and docs name it."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def artifact(self) -> str:
        return f"resources/{self.group or 'core'}/{self.resource}.ndjson"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.resource}"
        if name:
            base += f"/{name}"
        return f"{base}/{sub}" if sub else base

    def meta(self) -> dict[str, Any]:
        """What the artifact records about its type, so a restore needs no discovery of the source."""
        return {
            "format": "ndjson-objects-v1",
            "group": self.group,
            "version": self.version,
            "resource": self.resource,
            "kind": self.kind,
            "namespaced": self.namespaced,
            "status_subresource": self.status,
            "crd": self.crd,
            "storage_version": self.storage_version,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> ResourceType:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in meta.items() if k in fields}
        values["status"] = bool(meta.get("status_subresource"))
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class CrdInfo:
    group: str
    plural: str
    kind: str
    storage_version: str
    served: tuple[str, ...]
    status_versions: tuple[str, ...]  # versions whose schema declares the /status subresource
    namespaced: bool


def crd_index(client: KubeClient, page_size: int = 500) -> dict[tuple[str, str], CrdInfo]:
    """Every CRD's names, storage version and status subresource, keyed by (group, plural)."""
    index: dict[tuple[str, str], CrdInfo] = {}
    for page in client.list_pages(CRD_PATH, limit=page_size):
        for crd in page.get("items") or []:
            info = crd_info(crd)
            index[(info.group, info.plural)] = info
    return index


def crd_info(crd: dict[str, Any]) -> CrdInfo:
    spec = crd["spec"]
    versions = spec.get("versions") or []
    storage = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"] if versions else "")
    return CrdInfo(
        group=spec["group"],
        plural=spec["names"]["plural"],
        kind=spec["names"]["kind"],
        storage_version=storage,
        served=tuple(v["name"] for v in versions if v.get("served")),
        status_versions=tuple(v["name"] for v in versions if "status" in (v.get("subresources") or {})),
        namespaced=spec.get("scope") == "Namespaced",
    )


def discover(client: KubeClient, crds: dict[tuple[str, str], CrdInfo]) -> tuple[list[ResourceType], list[str]]:
    """All resources (one version each), and the group versions that could not be discovered."""
    groups, stale = _aggregated(client)
    if groups is None:
        groups, stale = _legacy(client)
    found: dict[tuple[str, str], ResourceType] = {}
    for group, versions in groups:
        for version, resources in versions:  # preferred version first
            for res in resources:
                key = (group, res["resource"])
                if key not in found:
                    found[key] = _resource(group, version, res, crds.get(key))
    # a CR's storage version may not be the preferred one: switch to it when it is served
    types = [_in_storage_version(t, crds.get((t.group, t.resource))) for t in found.values()]
    return sorted(types, key=lambda t: (t.group, t.resource)), stale


def served_versions(client: KubeClient) -> dict[tuple[str, str], tuple[str, ...]]:
    """``(group, resource) -> every version the server serves it in`` (preferred first): what a restore into
    another Kubernetes version resolves the backup's versions against (``versions.py``)."""
    groups, _stale = _aggregated(client)
    if groups is None:
        groups, _stale = _legacy(client)
    served: dict[tuple[str, str], tuple[str, ...]] = {}
    for group, versions in groups:
        for version, resources in versions:
            for res in resources:
                key = (group, res["resource"])
                served[key] = (*served.get(key, ()), version)
    return served


def _resource(group: str, version: str, res: dict[str, Any], crd: CrdInfo | None) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        resource=res["resource"],
        kind=res["kind"],
        namespaced=res["namespaced"],
        verbs=tuple(res.get("verbs") or ()),
        status="status" in res["subresources"],
        crd=crd is not None,
        storage_version=crd.storage_version if crd else None,
    )


def _in_storage_version(t: ResourceType, crd: CrdInfo | None) -> ResourceType:
    if crd is None or t.version == crd.storage_version or crd.storage_version not in crd.served:
        return t
    return dataclasses.replace(t, version=crd.storage_version, status=crd.storage_version in crd.status_versions)


Resources = list[dict[str, Any]]
Groups = list[tuple[str, list[tuple[str, Resources]]]]


def _aggregated(client: KubeClient) -> tuple[Groups | None, list[str]]:
    groups: Groups = []
    stale: list[str] = []
    for path in ("/api", "/apis"):
        resp = client.request("GET", path, accept=AGGREGATED)
        if "apidiscovery.k8s.io" not in resp.headers.get("Content-Type", ""):
            return None, []
        for item in resp.json().get("items") or []:
            name = item.get("metadata", {}).get("name", "")
            versions = []
            for v in item.get("versions") or []:
                if v.get("freshness") == "Stale":
                    stale.append(f"{name}/{v['version']}" if name else v["version"])
                    continue
                versions.append((v["version"], [_from_v2(r) for r in v.get("resources") or []]))
            groups.append((name, versions))
    return groups, stale


def _from_v2(res: dict[str, Any]) -> dict[str, Any]:
    return {
        "resource": res["resource"],
        "kind": (res.get("responseKind") or {}).get("kind", ""),
        "namespaced": res.get("scope") == "Namespaced",
        "verbs": res.get("verbs") or [],
        "subresources": [s["subresource"] for s in res.get("subresources") or []],
    }


def _legacy(client: KubeClient) -> tuple[Groups, list[str]]:
    """The pre-1.26 walk: /api, /apis, then every group version's resource list."""
    listed = [("", [(v, "") for v in client.get("/api").get("versions", [])])]
    for g in client.get("/apis").get("groups") or []:
        preferred = (g.get("preferredVersion") or {}).get("version")
        names = sorted((v["version"] for v in g.get("versions") or []), key=lambda v: v != preferred)
        listed.append((g["name"], [(v, g["name"]) for v in names]))
    groups: Groups = []
    stale: list[str] = []
    for group, versions in listed:
        out = []
        for version, _ in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                out.append((version, list(_from_legacy(client.get(path).get("resources") or []))))
            except ApiError:  # an unavailable aggregated API server: record it, back up the rest
                stale.append(f"{group}/{version}" if group else version)
        groups.append((group, out))
    return groups, stale


def _from_legacy(resources: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    subs: dict[str, list[str]] = {}
    for r in resources:
        if "/" in r["name"]:
            parent, sub = r["name"].split("/", 1)
            subs.setdefault(parent, []).append(sub)
    for r in resources:
        if "/" not in r["name"]:
            yield {
                "resource": r["name"],
                "kind": r.get("kind", ""),
                "namespaced": bool(r.get("namespaced")),
                "verbs": r.get("verbs") or [],
                "subresources": subs.get(r["name"], []),
            }
