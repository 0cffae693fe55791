"""When a released GitOps app counts as reconciled (drtool/kube/drift.py): the moment the drift report reads."""

from __future__ import annotations

from datetime import UTC, datetime

from drtool.kube.discovery import ResourceType
from drtool.kube.drift import Snapshot, changes, reconciled

RELEASED = datetime(2026, 12, 5, 17, 0, 0, 400000, tzinfo=UTC)


def _flux(observed: int, ready: str | None) -> dict:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    status = {"observedGeneration": observed, "conditions": conditions}
    return {"kind": "Kustomization", "metadata": {"generation": 3}, "status": status}


def test_flux_is_reconciled_once_it_observed_the_released_generation_and_says_ready() -> None:
    assert reconciled(_flux(3, "True"), RELEASED)
    assert reconciled(_flux(3, "False"), RELEASED)  # a failed apply is a result too: its drift is reported
    assert not reconciled(_flux(2, "True"), RELEASED)  # the verdict on the held generation
    assert not reconciled(_flux(3, "Unknown"), RELEASED)  # still progressing
    assert not reconciled(_flux(3, None), RELEASED)


def _argo(at: str | None, phase: str | None = None, requested: bool = False) -> dict:
    status = {"reconciledAt": at} if at else {}
    if phase:
        status["operationState"] = {"phase": phase}
    app = {"kind": "Application", "status": status}
    if requested:  # an automated sync Argo CD requested in the same update as its reconciledAt, not started yet
        app["operation"] = {"sync": {"revision": "abc"}, "initiatedBy": {"automated": True}}
    return app


def test_argo_is_reconciled_when_refreshed_since_the_release_and_no_sync_runs() -> None:
    assert reconciled(_argo("2026-12-05T17:00:00Z"), RELEASED)  # reconciledAt has whole seconds
    assert reconciled(_argo("2026-12-05T17:00:05Z", "Succeeded"), RELEASED)
    assert not reconciled(_argo("2026-12-05T16:59:59Z"), RELEASED)
    assert not reconciled(_argo("2026-12-05T17:00:05Z", "Running"), RELEASED)
    assert not reconciled(_argo(None), RELEASED)
    assert not reconciled(_argo("2026-12-05T17:00:05Z", requested=True), RELEASED)
    assert not reconciled(_argo("2026-12-05T17:00:05Z", "Succeeded", requested=True), RELEASED)  # a new one


CONFIGMAP = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)


def _snapshot(*objects: dict) -> Snapshot:
    snap = Snapshot.__new__(Snapshot)  # as read from a cluster, without one
    snap.objects = {(CONFIGMAP.key, f"web/{o['metadata']['name']}"): (CONFIGMAP, o) for o in objects}
    return snap


def test_a_prune_still_waiting_on_its_finalizers_is_reported_as_being_deleted() -> None:
    """Argo CD prunes with foreground deletion: until the garbage collector ends it, the object is still there,
    with a deletion time and the finalizer, and that is what the report says (not a field the API server set)."""
    was = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "retired", "namespace": "web"}}
    meta = {**was["metadata"], "deletionTimestamp": "2026-12-05T17:00:05Z", "finalizers": ["foregroundDeletion"]}
    lines = changes(_snapshot(was), _snapshot({**was, "metadata": meta}))
    assert lines == ["ConfigMap web/retired: being deleted (finalizers: foregroundDeletion)"]
    assert changes(_snapshot(was), _snapshot()) == ["ConfigMap web/retired: deleted"]
