"""Restore order, as data: what goes first and why (Velero keeps a similar list; docs/kubernetes.md prints it).

Types are restored level by level; the types of one level (and their objects) are restored concurrently.
A type not named here lands in the "everything else" level. Owners before dependents is handled
separately, object by object (an object waits until the objects in its ownerReferences exist).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from .discovery import ResourceType

REST = "*"

# (resource.group globs, reason); the list index is the level
PRIORITIES: list[tuple[tuple[str, ...], str]] = [
    (
        ("customresourcedefinitions.apiextensions.k8s.io",),
        "custom resources can only be created once their CRD is Established",
    ),
    (("namespaces",), "every namespaced object lives in one"),
    (
        ("storageclasses.storage.k8s.io", "priorityclasses.scheduling.k8s.io", "runtimeclasses.node.k8s.io"),
        "cluster-scoped classes that claims and pods name; admission rejects pods naming an unknown PriorityClass",
    ),
    (
        (
            "clusterroles.rbac.authorization.k8s.io",
            "clusterrolebindings.rbac.authorization.k8s.io",
            "roles.rbac.authorization.k8s.io",
            "rolebindings.rbac.authorization.k8s.io",
        ),
        "cluster-scoped and namespaced policy before the workloads that rely on it",
    ),
    (
        ("persistentvolumes", "persistentvolumeclaims"),
        "volumes and their claims before the pods that mount them",
    ),
    (("serviceaccounts",), "admission rejects a pod whose ServiceAccount does not exist"),
    (("secrets",), "referenced by pods, service accounts, ingresses and custom resources"),
    (("configmaps",), "referenced by pods and custom resources"),
    (
        ("limitranges", "resourcequotas"),
        "admission applies limits and quotas to the objects created after them",
    ),
    ((REST,), "everything else; owners before their dependents within and across levels"),
    (
        ("apiservices.apiregistration.k8s.io",),
        "an aggregated API whose service is not running yet makes discovery partial for every client",
    ),
    (
        (
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            "mutatingadmissionpolicies.admissionregistration.k8s.io",
            "mutatingadmissionpolicybindings.admissionregistration.k8s.io",
            "validatingadmissionpolicies.admissionregistration.k8s.io",
            "validatingadmissionpolicybindings.admissionregistration.k8s.io",
        ),
        "LAST: a webhook whose service is not running yet (failurePolicy Fail) would block every create after it",
    ),
]


def level_of(t: ResourceType) -> int:
    rest = next(i for i, (patterns, _) in enumerate(PRIORITIES) if REST in patterns)
    for i, (patterns, _) in enumerate(PRIORITIES):
        if any(p != REST and fnmatch.fnmatchcase(t.key, p) for p in patterns):
            return i
    return rest


def levels(types: Iterable[ResourceType]) -> list[list[ResourceType]]:
    """Types grouped by level, in restore order; empty levels dropped; types sorted within a level."""
    grouped: dict[int, list[ResourceType]] = {}
    for t in types:
        grouped.setdefault(level_of(t), []).append(t)
    return [sorted(grouped[i], key=lambda t: t.key) for i in sorted(grouped)]
