"""Source, target and restore settings, parsed once from the mappings drtool hands a plugin.

Values may come from a YAML config (lists, booleans) or from ``-t KEY=VALUE`` on the command line
(strings), so every list also accepts a comma-separated string and every flag a "true"/"false" string.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_bool, as_list, as_number

from .skips import SKIPPED_NAMESPACES
from .transforms import Transforms

EXISTING_POLICIES = ("update", "replace", "skip", "fail")
WEBHOOK_POLICIES = ("keep", "restore")


@dataclasses.dataclass(frozen=True)
class Connection:
    """How to reach one API server. ``compress`` asks for gzip: worth it over a WAN, not on loopback."""

    kubeconfig: str | None = None
    context: str | None = None
    timeout: float = 120.0
    connect_timeout: float = 10.0
    compress: bool = False

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Connection:
        return cls(
            kubeconfig=str(m["kubeconfig"]) if m.get("kubeconfig") else None,
            context=str(m["context"]) if m.get("context") else None,
            timeout=as_number(m.get("timeout"), 120.0, "timeout"),
            connect_timeout=as_number(m.get("connect_timeout"), 10.0, "connect_timeout"),
            compress=as_bool(m.get("compress"), False),
        )


def _matches(patterns: list[str], resource: str, group: str) -> bool:
    """``configmaps``, ``deployments.apps``, ``*.kueue.x-k8s.io``: a pattern without a dot also matches
    the bare resource name in any group, so ``deployments`` means deployments.apps."""
    full = f"{resource}.{group}" if group else resource
    return any(fnmatch.fnmatchcase(full, p) or ("." not in p and fnmatch.fnmatchcase(resource, p)) for p in patterns)


@dataclasses.dataclass(frozen=True)
class Filters:
    """What a backup selects. Namespace patterns and resource patterns are shell globs."""

    include_namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ()
    include_resources: tuple[str, ...] = ()
    exclude_resources: tuple[str, ...] = ()
    label_selector: str | None = None
    cluster_resources: bool | None = None  # None: yes unless include_namespaces narrows the backup
    default_skips: bool = True

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Filters:
        cluster = m.get("cluster_resources")
        return cls(
            include_namespaces=tuple(as_list(m.get("include_namespaces"))),
            exclude_namespaces=tuple(as_list(m.get("exclude_namespaces"))),
            include_resources=tuple(as_list(m.get("include_resources"))),
            exclude_resources=tuple(as_list(m.get("exclude_resources"))),
            label_selector=str(m["label_selector"]) if m.get("label_selector") else None,
            cluster_resources=None if cluster in (None, "", "auto") else as_bool(cluster, True),
            default_skips=as_bool(m.get("default_skips"), True),
        )

    def namespace_selected(self, namespace: str) -> bool:
        if namespace in SKIPPED_NAMESPACES:
            return False
        if self.include_namespaces and not any(fnmatch.fnmatchcase(namespace, p) for p in self.include_namespaces):
            return False
        return not any(fnmatch.fnmatchcase(namespace, p) for p in self.exclude_namespaces)

    def explicitly_included(self, resource: str, group: str) -> bool:
        return _matches(list(self.include_resources), resource, group)

    def explicitly_excluded(self, resource: str, group: str) -> bool:
        return _matches(list(self.exclude_resources), resource, group)

    def resource_selected(self, resource: str, group: str) -> bool:
        if self.include_resources and not self.explicitly_included(resource, group):
            return False
        return not self.explicitly_excluded(resource, group)

    def wants_cluster_resources(self) -> bool:
        return self.cluster_resources if self.cluster_resources is not None else not self.include_namespaces

    def exact_namespaces(self) -> list[str] | None:
        """Namespaces to LIST one by one, when the include list names them exactly (no globs)."""
        if not self.include_namespaces or any(set(p) & set("*?[") for p in self.include_namespaces):
            return None
        return [ns for ns in self.include_namespaces if self.namespace_selected(ns)]

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ((), None, True)}


def parse_namespace_map(value: Any) -> dict[str, str]:
    """``"a=b,c=d"`` or a mapping; a namespace may be the target of only one source namespace."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = []
        for item in as_list(value):
            src, sep, dst = item.partition("=")
            if not sep or not src.strip() or not dst.strip():
                raise UsageError(f"bad namespace_map entry {item!r}", "use old=new[,old2=new2]")
            pairs.append((src.strip(), dst.strip()))
    mapping = dict(pairs)
    targets = [v for v in mapping.values()]
    if len(set(targets)) != len(targets):
        raise UsageError("namespace_map maps two namespaces onto one", "each target namespace may appear once")
    return mapping


def parse_registry_map(value: Any) -> dict[str, str]:
    """``"old-host=new-host,..."`` or a mapping: where restored workloads pull their images from."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    pairs = [item.partition("=") for item in as_list(value)]
    if any(not sep or not src.strip() or not dst.strip() for src, sep, dst in pairs):
        raise UsageError(f"bad image_registry_map {value!r}", "use old-host=new-host[,old2=new2]")
    return {src.strip(): dst.strip() for src, _, dst in pairs}


@dataclasses.dataclass(frozen=True)
class RestoreOptions:
    """How a restore behaves; see docs/kubernetes.md for each option's reason."""

    existing: str = "update"
    namespace_map: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dry_run: bool = False
    restore_status: bool = True
    workers: int = 16  # restore is latency-bound (API server + etcd commit): 16 in flight ~doubles 8's rate
    crd_timeout: float = 60.0
    image_registry_map: Mapping[str, str] = dataclasses.field(default_factory=dict)  # images restored elsewhere
    # admission webhooks and aggregated APIs the target already has belong to its platform install: keep them
    webhooks: str = "keep"
    settle: float = 30.0  # verify: how long drifting objects are re-read while controllers finish reconciling
    # a plan's ``transforms:`` with namespace_map and image_registry_map under it: what ``apply`` rewrites
    transforms: Transforms = dataclasses.field(default_factory=Transforms)
    hold: bool = True  # Jobs, AI workloads and GitOps controllers restored held (drtool.kube.holds)
    release: bool = False  # this step releases what a restore held, and restores nothing
    drift: float = 0.0  # a release: wait up to this long for released GitOps apps to reconcile, report changes

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreOptions:
        merged = {**target, **options}  # options win; namespace_map may sit in either (verify sees target)
        existing = str(merged.get("existing") or "update").lower()
        if existing not in EXISTING_POLICIES:
            raise UsageError(f"existing={existing!r} is not a policy", f"choose {', '.join(EXISTING_POLICIES)}")
        workers = int(as_number(merged.get("workers"), 16, "workers"))
        webhooks = str(merged.get("webhooks") or "keep").lower()
        if webhooks not in WEBHOOK_POLICIES:
            raise UsageError(f"webhooks={webhooks!r} is not a policy", f"choose {', '.join(WEBHOOK_POLICIES)}")
        namespace_map = parse_namespace_map(merged.get("namespace_map"))
        registries = parse_registry_map(merged.get("image_registry_map"))
        transforms = Transforms.parse(merged.get("transforms")).merged(namespace_map, registries)
        return cls(
            existing=existing,
            namespace_map=transforms.namespaces,
            dry_run=as_bool(merged.get("dry_run"), False),
            restore_status=as_bool(merged.get("restore_status"), True),
            workers=max(1, workers),
            crd_timeout=as_number(merged.get("crd_timeout"), 60.0, "crd_timeout"),
            image_registry_map=transforms.image_registries,
            webhooks=webhooks,
            settle=max(0.0, as_number(merged.get("settle"), 30.0, "settle")),
            transforms=transforms,
            hold=as_bool(merged.get("hold"), True),
            release=as_bool(merged.get("release"), False),
            drift=max(0.0, as_number(merged.get("drift"), 0.0, "drift")),
        )


@dataclasses.dataclass(frozen=True)
class BackupOptions:
    """``page_size``: objects per LIST page (memory per worker); ``workers``: resource types listed at once."""

    page_size: int = 500
    workers: int = 4

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> BackupOptions:
        page = int(as_number(m.get("page_size"), 500, "page_size"))
        workers = int(as_number(m.get("workers"), 4, "workers"))
        return cls(page_size=max(1, page), workers=max(1, workers))
