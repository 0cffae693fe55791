"""One object's journey: cleaned into a backup record, transformed for a new cluster, normalised to compare.

A record is one line of an artifact::

    {"object": <cleaned object>, "status": {...}, "uid": "<old uid>", "owners": [<ownerReferences>]}

``object`` holds what a user declared, without what the old API server stamped on it (uid,
resourceVersion, managedFields, timestamps...), so an unchanged cluster produces identical bytes and
deduplicates. ``status`` is kept apart because it is written through another endpoint (``/status``) and
only when wanted. ``uid`` and ``owners`` let a restore rebuild ownerReferences with the NEW uids (a
stale uid would make the new cluster's garbage collector delete the object).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only named in annotations: settings -> transforms -> objects must not import the client
    from .discovery import ResourceType

Obj = dict[str, Any]

STRIPPED_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
    "generateName",
    "ownerReferences",  # kept in the record's "owners", remapped at restore
)
JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# annotations a controller of the NEW cluster writes with its own values (its own rollout count)
CONTROLLER_ANNOTATIONS = {
    "deployments.apps": ("deployment.kubernetes.io/revision",),
    "daemonsets.apps": ("deprecated.daemonset.template.generation",),
}
# Kueue: a workload carrying this label is Kueue's to admit and resume; on admission Kueue writes these into
# a Job's pod template (the Workload's name, derived from the OLD Job's uid, and the queues it was admitted by)
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_ADMISSION_LABELS = (
    "kueue.x-k8s.io/podset",
    "kueue.x-k8s.io/cluster-queue-name",
    "kueue.x-k8s.io/local-queue-name",
)
KUEUE_ADMISSION_ANNOTATIONS = ("kueue.x-k8s.io/workload",)


def dumps(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8. The same object always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def clean(obj: Obj, t: ResourceType) -> Obj:
    """The object as declared: apiVersion/kind filled in (LIST items of built-ins lack them), server
    bookkeeping and status removed."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in STRIPPED_METADATA}
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    out["apiVersion"], out["kind"], out["metadata"] = t.api_version, t.kind, meta
    return out


def to_record(obj: Obj, t: ResourceType) -> Obj:
    meta = obj.get("metadata") or {}
    record: Obj = {"object": clean(obj, t), "uid": meta.get("uid")}
    if obj.get("status") and not _is_crd(t):  # a CRD's status is the new API server's to write
        record["status"] = obj["status"]
    if meta.get("ownerReferences"):
        record["owners"] = meta["ownerReferences"]
    return record


def _is_crd(t: ResourceType) -> bool:
    return t.group == "apiextensions.k8s.io" and t.resource == "customresourcedefinitions"


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")


# --- restore-side transformation ------------------------------------------------------------------


def target_key(obj: Obj, t: ResourceType, ns_map: Mapping[str, str]) -> str:
    """The object's ``namespace/name`` in the target, after namespace mapping (without changing it)."""
    meta = obj.get("metadata") or {}
    name, ns = meta.get("name", ""), meta.get("namespace")
    if t.key == "namespaces":
        return ns_map.get(name, name)
    return f"{ns_map.get(ns, ns)}/{name}" if ns else name


def map_namespaces(obj: Obj, t: ResourceType, ns_map: Mapping[str, str]) -> Obj:
    """Apply ``namespace_map`` to metadata.namespace, to a Namespace's own name, and to the namespaces of
    (Cluster)RoleBinding subjects (so a ServiceAccount keeps its permissions after the move)."""
    if not ns_map:
        return obj
    meta = obj.setdefault("metadata", {})
    if meta.get("namespace") in ns_map:
        meta["namespace"] = ns_map[meta["namespace"]]
    if t.key == "namespaces" and meta.get("name") in ns_map:
        meta["name"] = ns_map[meta["name"]]
        if NAMESPACE_LABEL in (meta.get("labels") or {}):
            meta["labels"][NAMESPACE_LABEL] = meta["name"]
    if t.resource in ("rolebindings", "clusterrolebindings") and t.group == "rbac.authorization.k8s.io":
        for subject in obj.get("subjects") or []:
            if subject.get("namespace") in ns_map:
                subject["namespace"] = ns_map[subject["namespace"]]
    return obj


def drop_unportable(obj: Obj, t: ResourceType) -> Obj:
    """Remove fields a NEW cluster must choose itself (or that are immutable and bound to old uids)."""
    _drop_annotations(obj, CONTROLLER_ANNOTATIONS.get(t.key, ()))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    if KUEUE_QUEUE_LABEL in ((obj.get("metadata") or {}).get("labels") or {}) and "suspend" in spec:
        spec["suspend"] = True  # Kueue admits it again in the new cluster and resumes it; never run unadmitted
    if t.key == "services" and spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)  # allocated from the new cluster's service range
        spec.pop("clusterIPs", None)
    elif t.key == "jobs.batch":
        if not spec.get("manualSelector"):
            _drop_job_uid(spec)  # selector and labels carry the OLD job's uid; the API server makes new ones
        _drop_kueue_admission(spec)
    elif t.key == "pods":
        spec.pop("nodeName", None)  # the old node is gone; let the scheduler place it
    elif t.key == "persistentvolumes" and isinstance(spec.get("claimRef"), dict):
        for field in ("uid", "resourceVersion"):
            spec["claimRef"].pop(field, None)  # rebinds to the restored claim by name
    elif t.key == "persistentvolumeclaims":
        # the node the old scheduler picked for a WaitForFirstConsumer volume does not exist any more
        ((obj.get("metadata") or {}).get("annotations") or {}).pop(SELECTED_NODE, None)
    return obj


def _drop_annotations(obj: Obj, names: tuple[str, ...]) -> None:
    """Remove ``names``, and the map if nothing is left: applying an empty map would claim it whole."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations")
    if not names or not isinstance(annotations, dict):
        return
    for name in names:
        annotations.pop(name, None)
    if not annotations:
        del meta["annotations"]


def _drop_job_uid(spec: Obj) -> None:
    spec.pop("selector", None)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for label in JOB_UID_LABELS:
        labels.pop(label, None)


def _drop_kueue_admission(spec: Obj) -> None:
    """What Kueue wrote into the pod template when it admitted the OLD Job; it writes its own on admission."""
    meta = (spec.get("template") or {}).get("metadata") or {}
    for key, names in (("labels", KUEUE_ADMISSION_LABELS), ("annotations", KUEUE_ADMISSION_ANNOTATIONS)):
        for name in names:
            (meta.get(key) or {}).pop(name, None)
        if key in meta and not meta[key]:
            del meta[key]


def body_for_apply(record: Obj, t: ResourceType) -> Obj:
    """The object to apply to the new cluster, before the plan's transforms (``transforms.Transforms``, which
    map namespaces too). Status goes with it only where the API treats status as ordinary data (a CRD without
    the /status subresource); otherwise it is written separately."""
    obj = drop_unportable(record["object"], t)
    if record.get("status") and not t.status:
        obj["status"] = record["status"]
    return obj


# --- comparison -----------------------------------------------------------------------------------


def comparable(obj: Obj, t: ResourceType, owners: list[Obj] | None, status: Any = None) -> Obj:
    """What verify compares: the portable part of an object, owners without uids (those differ by design)."""
    out = drop_unportable(obj, t)
    refs = [{k: v for k, v in ref.items() if k != "uid"} for ref in owners or []]
    if refs:
        out.setdefault("metadata", {})["ownerReferences"] = refs
    if status is not None:
        out["status"] = status
    return out


def comparable_from_record(record: Obj, t: ResourceType, with_status: bool) -> Obj:
    """The backup's side, once the plan's transforms have rewritten ``record["object"]`` for the target."""
    return comparable(record["object"], t, record.get("owners"), record.get("status") if with_status else None)


def comparable_from_live(live: Obj, t: ResourceType, with_status: bool) -> Obj:
    meta = live.get("metadata") or {}
    return comparable(clean(live, t), t, meta.get("ownerReferences"), live.get("status") if with_status else None)


def apply_form(obj: Obj, t: ResourceType) -> Obj:
    """What an apply would write, to tell "unchanged" without a request: the portable fields, owners WITH
    uids (a reference to another uid is a real difference), status where it is part of the object."""
    out = drop_unportable(clean(obj, t), t)
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    if refs:
        out["metadata"]["ownerReferences"] = refs
    if t.crd and not t.status and obj.get("status") is not None:
        out["status"] = obj["status"]
    return out


def digest(obj: Obj) -> str:
    return hashlib.sha256(dumps(obj)).hexdigest()
