"""Nothing restored starts on its own: AI workloads and GitOps controllers are restored held, and released by
a plan step once what they need (checkpoints, quotas) is restored and checked.

The moment a Job, TrainJob or RayJob appears in a new cluster its controller starts it again (velero #3519;
kubeflow/trainer #3737), and an Argo CD Application or Flux Kustomization with automated sync starts
reconciling against Git while the restore is still writing (argo-cd #8257). So the restore writes each kind
in ``RULES`` held, and records what it changed in the annotation ``HELD`` (JSON: field path -> the
backup's value), so a release needs nothing but the target cluster and puts back exactly the backup's:

- Jobs, CronJobs, TrainJobs, JobSets, RayJobs, RayClusters: ``spec.suspend: true`` (a RayJob also
  ``spec.shutdownAfterJobFinishes: true``, the only form of a suspended RayJob KubeRay accepts: ``ALSO_HELD``);
  PyTorchJobs: ``spec.runPolicy.suspend: true``; Flux Kustomizations and HelmReleases: ``spec.suspend: true``;
- Argo CD Applications: ``spec.syncPolicy.automated`` removed (manual sync only);
- a workload Kueue manages (label ``kueue.x-k8s.io/queue-name``) also loses that label while held: Kueue
  admits a suspended Job and unsuspends it itself, so the label is what keeps Kueue away until the release,
  which gives the label back and leaves the workload suspended for Kueue to admit and resume;
- any other object owned by another restored object is left to its owner (its ownerReferences relinked to the
  owner's new uid): holding the owner holds it, and releasing it is the owner controller's job;
- a Job, TrainJob or JobSet that had completed in the source (condition ``Complete``, or ``Completed`` for a
  JobSet: ``DONE_CONDITIONS``) is restored as a record: held like the others, marked ``COMPLETED`` with its
  completion time, and never released (it does not run again);
- what an operator makes from its object (a TrainJob's JobSet, a JobSet's Jobs, a RayJob's RayCluster) is not
  restored at all (``drtool.kube.skips``): the operator makes it again from the restored object, held with it
  (Trainer gives a suspended TrainJob a suspended JobSet, whose Jobs JobSet creates suspended: no pod runs).

The kubernetes plugin applies ``hold`` to the backup's objects on its restore path and to the backup side of
its verification (``hold: false`` turns it off); its ``release: true`` step calls ``release``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .artifacts import records, types_in
from .client import ApiError, KubeClient
from .objects import KUEUE_QUEUE_LABEL, dumps, target_key

if TYPE_CHECKING:
    from drtool.plugin.contract import RestoreContext

    from .discovery import ResourceType

Obj = dict[str, Any]
HELD = "drtool.dev/held"  # JSON: dotted field path -> the backup's value (None: the field was absent)
COMPLETED = "drtool.dev/completed"  # a Job that had completed in the source: its completion time; never released
QUEUE_LABEL_PATH = f"metadata.labels.{KUEUE_QUEUE_LABEL}"
RELEASE_MANAGER = "drtool-release"  # the field manager of a release's patches
MERGE = "application/merge-patch+json"
SUSPEND = ("spec.suspend", True)
AUTOMATED = ("spec.syncPolicy.automated", None)  # None: the held form has no such field
# (API group, kind) -> (dotted field, its held value)
RULES: dict[tuple[str, str], tuple[str, Any]] = {
    ("batch", "Job"): SUSPEND,
    ("batch", "CronJob"): SUSPEND,
    ("trainer.kubeflow.org", "TrainJob"): SUSPEND,
    ("jobset.x-k8s.io", "JobSet"): SUSPEND,
    ("ray.io", "RayJob"): SUSPEND,
    ("ray.io", "RayCluster"): SUSPEND,
    ("kubeflow.org", "PyTorchJob"): ("spec.runPolicy.suspend", True),
    ("kustomize.toolkit.fluxcd.io", "Kustomization"): SUSPEND,
    ("helm.toolkit.fluxcd.io", "HelmRelease"): SUSPEND,
    ("argoproj.io", "Application"): AUTOMATED,
}

# fields set with the rule's while held, because the operator refuses the held form without them: KubeRay marks
# a suspended RayJob whose cluster outlives its job ``ValidationFailed`` for good (ray-operator v1.5.0,
# ValidateRayJobSpec; found with the real operator, tests/plugins/test_kuberay_holds.py)
ALSO_HELD: dict[tuple[str, str], tuple[tuple[str, Any], ...]] = {
    ("ray.io", "RayJob"): (("spec.shutdownAfterJobFinishes", True),),
}


# a warm standby (drtool.kube.standby) also holds what serves: it must not run the primary's services twice
STANDBY_RULES: dict[tuple[str, str], tuple[str, Any]] = {
    **RULES,
    ("apps", "Deployment"): ("spec.replicas", 0),
    ("apps", "StatefulSet"): ("spec.replicas", 0),
}


def rule_for(t: ResourceType, rules: Mapping[tuple[str, str], tuple[str, Any]] = RULES) -> tuple[str, Any] | None:
    return rules.get((t.group, t.kind))


def hold(record: Obj, t: ResourceType, rules: Mapping[tuple[str, str], tuple[str, Any]] = RULES) -> bool:
    """Put ``record["object"]`` in its held form, in place; whether it is held (objects no rule names, and
    objects with an owner, are left as they are)."""
    obj = record["object"]
    rule = rule_for(t, rules)
    if rule is None or record.get("owners") or _selects_a_cluster(obj, t):
        return False
    path = rule[0]
    was: dict[str, Any] = {}
    for field, held_value in (rule, *ALSO_HELD.get((t.group, t.kind), ())):
        current = _get(obj, field)
        if current != held_value:
            was[field] = current
            _set(obj, field, held_value)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if KUEUE_QUEUE_LABEL in labels:
        was.pop(path, None)  # Kueue's to resume on admission: a release gives the label back, the rest stays held
        was[QUEUE_LABEL_PATH] = labels.pop(KUEUE_QUEUE_LABEL)
        if not labels:
            del obj["metadata"]["labels"]
    annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
    done = completed(record, t)
    if done:
        annotations[COMPLETED] = done
    if was:
        annotations[HELD] = json.dumps(was, sort_keys=True, separators=(",", ":"))
    if not annotations:
        del obj["metadata"]["annotations"]
    return bool(was or done)


def _selects_a_cluster(obj: Obj, t: ResourceType) -> bool:
    """A RayJob in ClusterSelector mode runs on a RayCluster of its own, and KubeRay refuses to suspend it
    (``ValidationFailed`` for good): it is left as it is, and the RayCluster it selects is held instead."""
    return (t.group, t.kind) == ("ray.io", "RayJob") and bool((obj.get("spec") or {}).get("clusterSelector"))


# (API group, kind) -> the condition type that says it ran to its end (a Job's ``completionTime`` kept too)
DONE_CONDITIONS: dict[tuple[str, str], str] = {
    ("batch", "Job"): "Complete",
    ("trainer.kubeflow.org", "TrainJob"): "Complete",  # Trainer v2: TrainJobComplete
    ("jobset.x-k8s.io", "JobSet"): "Completed",  # JobSet: JobSetCompleted
}


def completed(record: Obj, t: ResourceType) -> str:
    """When a Job, TrainJob or JobSet that had completed in the source completed ("" for anything else).

    Status is not restored: without this, the restored copy of a finished run starts from the beginning the
    moment it is released (velero #3519)."""
    done_type = DONE_CONDITIONS.get((t.group, t.kind))
    if done_type is None:
        return ""
    status = record.get("status") or {}
    done = [c for c in status.get("conditions") or [] if c.get("type") == done_type and c.get("status") == "True"]
    if not done:
        return ""
    return str(status.get("completionTime") or done[0].get("lastTransitionTime") or "complete")


def release_patch(live: Obj) -> tuple[Obj, str] | None:
    """The merge patch that puts a held object back to the backup's values, and what it puts back (for the
    report: ``spec.suspend=false, metadata.labels.kueue.x-k8s.io/queue-name="team-queue"``); None when the
    object is not held, or is a completed Job's record."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if HELD not in annotations or COMPLETED in annotations:
        return None
    was = json.loads(annotations[HELD])
    patch: Obj = {"metadata": {"annotations": {HELD: None}}}
    for path, value in was.items():
        if path == QUEUE_LABEL_PATH:
            patch["metadata"]["labels"] = {KUEUE_QUEUE_LABEL: value}
        else:
            _set(patch, path, value, drop_none=False)  # null deletes a field the backup did not have
    return patch, ", ".join(f"{path}={json.dumps(value)}" for path, value in sorted(was.items()))


def _get(obj: Mapping[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)  # type: ignore[assignment]
    return obj


def _set(obj: Obj, path: str, value: Any, drop_none: bool = True) -> None:
    """Set a dotted field, making its parents; ``None`` removes it (``drop_none``) or is kept (a merge patch)."""
    *parents, leaf = path.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    if value is None and drop_none:
        obj.pop(leaf, None)
    else:
        obj[leaf] = value


def release(ctx: RestoreContext, client: KubeClient, ns_map: Mapping[str, str], dry_run: bool) -> dict[str, list[str]]:
    """Release every object of this backup that the target holds: ``released`` (each with what was put back),
    ``records`` (completed Jobs, kept held), ``missing`` (not in the target). Only the backup's own objects
    are touched, found by name: a release never reaches objects another restore (or a person) held."""
    out: dict[str, list[str]] = {"released": [], "records": [], "missing": []}
    for t in types_in(ctx):
        if rule_for(t) is None:
            continue
        for rec in records(ctx, t):
            if rec.get("owners"):
                continue
            key = target_key(rec["object"], t, ns_map)
            live = read_key(client, t, key)
            if live is None:
                out["missing"].append(f"{t.kind} {key}")
                continue
            if COMPLETED in ((live.get("metadata") or {}).get("annotations") or {}):
                out["records"].append(f"{t.kind} {key}")
                continue
            found = release_patch(live)
            if found is None:
                continue
            patch, what = found
            if not dry_run:
                ns, _, name = key.rpartition("/")
                params = {"fieldManager": RELEASE_MANAGER}
                client.request("PATCH", t.path(ns or None, name), params=params, body=dumps(patch), content_type=MERGE)
            out["released"].append(f"{t.kind} {key}: {what}")
    return out


def read_key(client: KubeClient, t: ResourceType, key: str) -> Obj | None:
    """The target's object of type ``t`` at ``namespace/name`` (or ``name``), None when it is not there."""
    ns, _, name = key.rpartition("/")
    try:
        return client.get(t.path(ns or None, name))
    except ApiError as exc:
        if exc.status != 404:
            raise
        return None


def still_held(ctx: RestoreContext, client: KubeClient, ns_map: Mapping[str, str]) -> list[str]:
    """The backup's objects the target still holds (completed Jobs' records aside): after a release, none."""
    left = release(ctx, client, ns_map, dry_run=True)
    return left["released"]
