"""The checklist items a cluster's own objects answer: save within the notice window, spread replicas,
drainable nodes, isolated GPUs.

Each function grades one item from a ``ClusterView`` and names every object it judged in the evidence, good
ones too, so a pass shows what it rests on.
"""

from __future__ import annotations

from typing import Any

from .cluster import GPU, ClusterView, Obj, gpus, name_of, pod_spec
from .grades import Grade, Status, worst

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue may preempt what it queues
PREEMPTIBLE = "drtool.dev/preemptible"  # "true" on a workload preemptible by other means (spot nodes, ...)
SAVE_SECONDS = "drtool.dev/checkpoint-save-seconds"  # the trainer's measured time of its last checkpoint save
DEFAULT_GRACE = 30  # Kubernetes' default terminationGracePeriodSeconds
DEFAULT_BACKOFF = 6  # Kubernetes' default Job backoffLimit
ISOLATING_EFFECTS = ("NoSchedule", "NoExecute")
LIFECYCLE_TAINTS = "node.kubernetes.io/"  # Kubernetes' own (not-ready, unreachable, ...): they come and go, no policy


def _meta(obj: Obj, key: str) -> dict[str, str]:
    return (obj.get("metadata") or {}).get(key) or {}


def preemptible_save(view: ClusterView) -> Grade:
    """A preemptible training Job's grace period must cover its measured checkpoint save."""
    evidence: list[str] = []
    statuses: list[Status] = []
    for job in view.objects["jobs"]:
        labels, notes = _meta(job, "labels"), _meta(job, "annotations")
        if QUEUE_LABEL not in labels and notes.get(PREEMPTIBLE) != "true":
            continue
        grace = pod_spec(job).get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        measured = notes.get(SAVE_SECONDS)
        if measured is None:
            statuses.append("unknown")
            evidence.append(f"{name_of(job)}: preemptible, grace {grace}s, no measured save time ({SAVE_SECONDS})")
            continue
        fits = float(measured) <= grace
        statuses.append("pass" if fits else "fail")
        verb = "covers" if fits else "is shorter than"
        evidence.append(f"{name_of(job)}: grace {grace}s {verb} its last checkpoint save of {measured}s")
    if not statuses:
        evidence.append("no preemptible training Job (Kueue-queued or annotated) found")
    return Grade("preemptible-save", "Preemptible tasks can save within the notice window", worst(statuses), evidence)


def _spread(obj: Obj) -> str | None:
    """How a workload spreads its replicas, or None."""
    spec = pod_spec(obj)
    keys = [c.get("topologyKey") for c in spec.get("topologySpreadConstraints") or []]
    if keys:
        return f"topology spread over {', '.join(map(str, keys))}"
    anti = (spec.get("affinity") or {}).get("podAntiAffinity") or {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [
        t.get("podAffinityTerm") or {} for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ]
    if terms:
        return f"pod anti-affinity over {', '.join(str(t.get('topologyKey')) for t in terms)}"
    return None


def _replicated(view: ClusterView) -> list[Obj]:
    return [
        o
        for kind in ("deployments", "statefulsets")
        for o in view.objects[kind]
        if (o.get("spec") or {}).get("replicas", 1) >= 2
    ]


def inference_spread(view: ClusterView) -> Grade:
    """Serving replicas must not share one node's or one zone's fate."""
    evidence: list[str] = []
    statuses: list[Status] = []
    for obj in _replicated(view):
        how = _spread(obj)
        statuses.append("pass" if how else "fail")
        replicas = obj["spec"]["replicas"]
        evidence.append(f"{name_of(obj)}: {replicas} replicas, {how or 'no topology spread and no anti-affinity'}")
    if not statuses:
        evidence.append("no Deployment or StatefulSet with two or more replicas")
    return Grade(
        "inference-spread", "Inference replicas are spread across nodes or failure domains", worst(statuses), evidence
    )


def _selects(pdb: Obj, obj: Obj) -> bool:
    if (pdb["metadata"].get("namespace")) != obj["metadata"].get("namespace"):
        return False
    wanted = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    labels = (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _blocks(pdb: Obj, replicas: int) -> str | None:
    """Why ``pdb`` lets no pod of ``replicas`` be evicted, or None."""
    spec = pdb.get("spec") or {}
    if "maxUnavailable" in spec and str(spec["maxUnavailable"]) in ("0", "0%"):
        return "maxUnavailable 0"
    least = spec.get("minAvailable")
    if least is None:
        return None
    if str(least) == "100%" or (isinstance(least, int) and least >= replicas > 0):
        return f"minAvailable {least} of {replicas} replicas"
    return None


def pdb_drain(view: ClusterView) -> Grade:
    """No PodDisruptionBudget may leave a node drain waiting forever."""
    workloads = [o for kind in ("deployments", "statefulsets") for o in view.objects[kind]]
    evidence: list[str] = []
    statuses: list[Status] = []
    for pdb in view.objects["poddisruptionbudgets"]:
        replicas = sum((o.get("spec") or {}).get("replicas", 1) for o in workloads if _selects(pdb, o))
        why = _blocks(pdb, replicas)
        statuses.append("fail" if why else "pass")
        evidence.append(
            f"{name_of(pdb)}: {'blocks a drain: ' + why if why else f'lets a drain evict ({replicas} replicas)'}"
        )
    if not statuses:
        evidence.append("no PodDisruptionBudget: nothing holds a drain")
    return Grade(
        "pdb-drain",
        "PodDisruptionBudgets do not block normal node maintenance",
        worst(statuses, empty="pass"),
        evidence,
    )


def gpu_isolation(view: ClusterView, max_retries: int = 3) -> Grade:
    """GPU nodes carry a taint (a faulty one can be fenced); GPU Jobs stop retrying instead of looping."""
    evidence: list[str] = []
    statuses: list[Status] = []
    gpu_nodes = [n for n in view.nodes if ((n.get("status") or {}).get("capacity") or {}).get(GPU)]
    untainted = [name_of(n) for n in gpu_nodes if not _isolating(n)]
    if gpu_nodes:
        statuses.append("fail" if untainted else "pass")
        evidence.append(
            f"{len(gpu_nodes) - len(untainted)} of {len(gpu_nodes)} GPU nodes tainted"
            + (f"; untainted: {', '.join(untainted)}" if untainted else "")
        )
    for job in view.objects["jobs"]:
        if not gpus(job):
            continue
        spec = job.get("spec") or {}
        backoff = spec.get("backoffLimit", DEFAULT_BACKOFF)
        if spec.get("podFailurePolicy"):
            statuses.append("pass")
            evidence.append(f"{name_of(job)}: a podFailurePolicy decides which failures retry")
        elif backoff <= max_retries:
            statuses.append("pass")
            evidence.append(f"{name_of(job)}: backoffLimit {backoff}")
        else:
            statuses.append("fail")
            evidence.append(
                f"{name_of(job)}: backoffLimit {backoff} (over {max_retries}) and no podFailurePolicy: "
                "a faulty GPU is retried"
            )
    return Grade(
        "gpu-isolation", "Faulty GPUs are isolated rather than retried indefinitely", worst(statuses), evidence
    )


def _isolating(node: dict[str, Any]) -> bool:
    """A taint someone chose (a GPU pool's, a health checker's), not only the node lifecycle's."""
    taints = (node.get("spec") or {}).get("taints") or []
    return any(
        t.get("effect") in ISOLATING_EFFECTS and not str(t.get("key")).startswith(LIFECYCLE_TAINTS) for t in taints
    )
