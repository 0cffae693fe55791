"""Which Kueue objects are configuration, and in which order a new cluster must receive them — as data.

Kueue splits cleanly into configuration (quotas, flavors, policies: what an administrator declared) and
runtime state (Workloads, every ``status``: what the controller computes from jobs that ran). Only the
configuration is backed up: a Workload belongs to a job object and is re-created by Kueue when the job is
re-submitted; restoring it would show admissions that no longer hold (the old cluster's pods are gone)
and would hold quota that nothing uses. docs/kueue.md prints both lists with these reasons.
"""

from __future__ import annotations

from collections.abc import Iterable

GROUP = "kueue.x-k8s.io"
SECRETS = "secrets"
NAMESPACES = "namespaces"
CRDS = "customresourcedefinitions.apiextensions.k8s.io"
DEFAULT_KUEUE_NAMESPACE = "kueue-system"  # where the Kueue manager runs, and where it reads kubeconfig Secrets


def key(resource: str) -> str:
    """``resource.group`` of a Kueue resource, as the toolkit names types."""
    return f"{resource}.{GROUP}"


TOPOLOGIES = key("topologies")
FLAVORS = key("resourceflavors")
PRIORITY_CLASSES = key("workloadpriorityclasses")
MK_CLUSTERS = key("multikueueclusters")
MK_CONFIGS = key("multikueueconfigs")
PROVISIONING = key("provisioningrequestconfigs")
CHECKS = key("admissionchecks")
COHORTS = key("cohorts")
CLUSTER_QUEUES = key("clusterqueues")
LOCAL_QUEUES = key("localqueues")

# Restore order: (type keys, reason); the list index is the level, the types of one level go together.
ORDER: list[tuple[tuple[str, ...], str]] = [
    ((CRDS,), "only the Kueue CRDs the target lacks (install_crds): objects of a kind need its CRD Established"),
    ((NAMESPACES,), "LocalQueues and the MultiKueue kubeconfig Secrets live in them; created, never changed"),
    ((TOPOLOGIES,), "a ResourceFlavor's topologyName names one, and is immutable once the flavor exists"),
    ((FLAVORS,), "ClusterQueues and Cohorts give quota per flavor; a CQ naming a missing one is Inactive"),
    ((PRIORITY_CLASSES,), "jobs name them in a label; in place before any job is re-submitted"),
    ((SECRETS,), "a MultiKueueCluster reads its worker's kubeconfig from a Secret in Kueue's namespace"),
    ((MK_CLUSTERS,), "a MultiKueueConfig lists them"),
    ((MK_CONFIGS, PROVISIONING), "the parameters an AdmissionCheck points at"),
    ((CHECKS,), "ClusterQueues name them in admissionChecksStrategy; a CQ naming a missing one is Inactive"),
    ((COHORTS,), "ClusterQueues join them by cohortName; parents before children, so no tree is half-built"),
    ((CLUSTER_QUEUES,), "LocalQueues point at them"),
    ((LOCAL_QUEUES,), "last: what users submit jobs to; in place only once their ClusterQueue is"),
]

CONFIG: tuple[str, ...] = tuple(k for keys, _ in ORDER for k in keys if k.endswith(f".{GROUP}"))

# Never backed up, with the reason (docs/kueue.md); any other Kueue kind is reported as unknown.
RUNTIME: dict[str, str] = {
    key("workloads"): "runtime state: one per submitted job, re-created by Kueue when the job is re-submitted",
}


def level_of(type_key: str) -> int:
    return next(i for i, (keys, _) in enumerate(ORDER) if type_key in keys)


def levels(type_keys: Iterable[str]) -> list[list[str]]:
    """The given types grouped by level, in restore order (unknown types are not restored)."""
    grouped: dict[int, list[str]] = {}
    for k in type_keys:
        if any(k in keys for keys, _ in ORDER):
            grouped.setdefault(level_of(k), []).append(k)
    return [sorted(grouped[i]) for i in sorted(grouped)]
