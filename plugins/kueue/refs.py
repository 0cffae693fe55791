"""References between Kueue objects, as data: who names whom, and what Kueue does when the name is missing.

Kueue's API server side accepts a ClusterQueue naming a flavor that does not exist (there is no
referential integrity in Kubernetes); its controller then keeps the queue Inactive (``FlavorNotFound``)
and admits nothing through it. A restore that silently recreates such a queue has failed without saying
so, which is why references are checked before anything is written: every name must resolve in the
backup or in the target. The rule names are what ``allow_missing`` accepts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_list

from .kinds import (
    CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    FLAVORS,
    LOCAL_QUEUES,
    MK_CLUSTERS,
    MK_CONFIGS,
    PROVISIONING,
    SECRETS,
    TOPOLOGIES,
)

Obj = dict[str, Any]
Ref = tuple[str, str, str]  # (type key of the named object, its key: name or namespace/name, field naming it)

KIND_OF = {
    TOPOLOGIES: "Topology",
    FLAVORS: "ResourceFlavor",
    MK_CLUSTERS: "MultiKueueCluster",
    MK_CONFIGS: "MultiKueueConfig",
    PROVISIONING: "ProvisioningRequestConfig",
    CHECKS: "AdmissionCheck",
    COHORTS: "Cohort",
    CLUSTER_QUEUES: "ClusterQueue",
    LOCAL_QUEUES: "LocalQueue",
    SECRETS: "Secret",
}
# AdmissionCheck parameters Kueue itself defines; others belong to third-party check controllers
CHECK_PARAMETERS = {("kueue.x-k8s.io", "ProvisioningRequestConfig"): PROVISIONING,
                    ("kueue.x-k8s.io", "MultiKueueConfig"): MK_CONFIGS}  # fmt: skip


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _group_flavors(spec: Obj) -> Iterator[Ref]:
    for i, group in enumerate(spec.get("resourceGroups") or []):
        for j, flavor in enumerate(group.get("flavors") or []):
            if flavor.get("name"):
                yield FLAVORS, flavor["name"], f"spec.resourceGroups[{i}].flavors[{j}].name"


def _check_rules(spec: Obj) -> list[Obj]:
    return (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []


def cq_flavors(obj: Obj, _ns: str) -> Iterator[Ref]:
    """Flavors a ClusterQueue gives quota of, and those its admission checks are limited to."""
    spec = _spec(obj)
    yield from _group_flavors(spec)
    for i, rule in enumerate(_check_rules(spec)):
        for j, name in enumerate(rule.get("onFlavors") or []):
            yield FLAVORS, name, f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]"


def cq_checks(obj: Obj, _ns: str) -> Iterator[Ref]:
    """AdmissionChecks a ClusterQueue requires (v1beta2 strategy; v1beta1's plain list too)."""
    spec = _spec(obj)
    for i, rule in enumerate(_check_rules(spec)):
        yield CHECKS, rule["name"], f"spec.admissionChecksStrategy.admissionChecks[{i}].name"
    for i, name in enumerate(spec.get("admissionChecks") or []):
        yield CHECKS, name, f"spec.admissionChecks[{i}]"


def lq_queue(obj: Obj, _ns: str) -> Iterator[Ref]:
    if _spec(obj).get("clusterQueue"):
        yield CLUSTER_QUEUES, _spec(obj)["clusterQueue"], "spec.clusterQueue"


def cohort_parent(obj: Obj, _ns: str) -> Iterator[Ref]:
    if _spec(obj).get("parentName"):
        yield COHORTS, _spec(obj)["parentName"], "spec.parentName"


def cohort_flavors(obj: Obj, _ns: str) -> Iterator[Ref]:
    yield from _group_flavors(_spec(obj))


def flavor_topology(obj: Obj, _ns: str) -> Iterator[Ref]:
    if _spec(obj).get("topologyName"):
        yield TOPOLOGIES, _spec(obj)["topologyName"], "spec.topologyName"


def check_parameters(obj: Obj, _ns: str) -> Iterator[Ref]:
    params = _spec(obj).get("parameters") or {}
    target = CHECK_PARAMETERS.get((params.get("apiGroup", ""), params.get("kind", "")))
    if target and params.get("name"):
        yield target, params["name"], "spec.parameters"


def config_clusters(obj: Obj, _ns: str) -> Iterator[Ref]:
    for i, name in enumerate(_spec(obj).get("clusters") or []):
        yield MK_CLUSTERS, name, f"spec.clusters[{i}]"


def kubeconfig_source(obj: Obj) -> tuple[Obj, str]:
    """A MultiKueueCluster's kubeConfig block and its field path (v1beta2 ``clusterSource``, v1beta1 flat)."""
    spec = _spec(obj)
    if isinstance(spec.get("clusterSource"), dict):
        return spec["clusterSource"].get("kubeConfig") or {}, "spec.clusterSource.kubeConfig.location"
    return spec.get("kubeConfig") or {}, "spec.kubeConfig.location"


def cluster_secret(obj: Obj, kueue_namespace: str) -> Iterator[Ref]:
    """The kubeconfig Secret of a MultiKueueCluster (``locationType: Secret``, the default), which Kueue
    reads from its own namespace; a ``Path`` location is a file on the manager's disk (a dependency)."""
    kubeconfig, field = kubeconfig_source(obj)
    if kubeconfig.get("location") and kubeconfig.get("locationType", "Secret") == "Secret":
        yield SECRETS, f"{kueue_namespace}/{kubeconfig['location']}", field


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str  # what allow_missing accepts
    source: str  # type key of the naming object
    extract: Callable[[Obj, str], Iterable[Ref]]
    effect: str  # what Kueue does when the named object is missing


RULES: tuple[Rule, ...] = (
    Rule("flavor", CLUSTER_QUEUES, cq_flavors, "Kueue keeps the ClusterQueue Inactive (FlavorNotFound)"),
    Rule("flavor", COHORTS, cohort_flavors, "the Cohort's quota of that flavor is unusable"),
    Rule("admission-check", CLUSTER_QUEUES, cq_checks, "Kueue keeps the ClusterQueue Inactive until the check exists"),
    Rule("cluster-queue", LOCAL_QUEUES, lq_queue, "the LocalQueue is Inactive: jobs submitted to it stay pending"),
    Rule(
        "cohort-parent",
        COHORTS,
        cohort_parent,
        "Kueue treats the parent as an implicit root cohort without quota: the tree is not the backed-up one",
    ),
    Rule("topology", FLAVORS, flavor_topology, "ClusterQueues using the flavor are Inactive until it exists"),
    Rule("check-parameters", CHECKS, check_parameters, "the AdmissionCheck is Inactive, and so are its queues"),
    Rule("multikueue-cluster", MK_CONFIGS, config_clusters, "workloads are not dispatched to that worker"),
    Rule(
        "kubeconfig-secret",
        MK_CLUSTERS,
        cluster_secret,
        "the MultiKueueCluster cannot connect to its worker (not Active)",
    ),
)
RULE_NAMES = tuple(dict.fromkeys(r.name for r in RULES))


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")


@dataclasses.dataclass(frozen=True)
class MissingRef:
    """One name that resolves neither in the backup nor in the target."""

    rule: str
    source: str  # "ClusterQueue cq-speech"
    target: str  # "ResourceFlavor l4"
    field: str
    effect: str

    def __str__(self) -> str:
        return f"{self.source} {self.field} -> {self.target}"


def references(objects: Mapping[str, Iterable[Obj]], kueue_namespace: str) -> Iterator[tuple[Rule, Obj, Ref]]:
    """Every reference the objects carry: (rule, naming object, (type key, key, field))."""
    for rule in RULES:
        for obj in objects.get(rule.source, ()):
            for ref in rule.extract(obj, kueue_namespace):
                yield rule, obj, ref


def missing(
    objects: Mapping[str, Iterable[Obj]], exists: Callable[[str, str], bool], kueue_namespace: str
) -> list[MissingRef]:
    """References whose object ``exists(type key, key)`` denies, each reported once, in a stable order."""
    found: dict[tuple[str, str, str, str], MissingRef] = {}
    for rule, obj, (target, name, field) in references(objects, kueue_namespace):
        if exists(target, name):
            continue
        source = f"{obj.get('kind')} {object_key(obj)}"
        ref = MissingRef(rule.name, source, f"{KIND_OF.get(target, target)} {name}", field, rule.effect)
        found.setdefault((rule.name, source, target, name), ref)
    return sorted(found.values(), key=lambda m: (m.rule, m.source, m.target))


def parse_allowed(value: Any) -> frozenset[str]:
    """``allow_missing``: false (default), true/all, or a comma list of rule names."""
    if value is None or value is False or str(value).lower() in ("", "false", "no", "0", "none"):
        return frozenset()
    if value is True or str(value).lower() in ("true", "yes", "1", "all"):
        return frozenset(RULE_NAMES)
    names = frozenset(as_list(value))
    unknown = sorted(names - set(RULE_NAMES))
    if unknown:
        raise UsageError(
            f"allow_missing: unknown reference kind(s) {', '.join(unknown)}", f"use {', '.join(RULE_NAMES)}"
        )
    return names
