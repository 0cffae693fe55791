"""When a released GitOps app counts as reconciled (drtool/kube/drift.py): the moment the drift report reads."""

from __future__ import annotations

from datetime import UTC, datetime

from drtool.kube.drift import reconciled

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


def _argo(at: str | None, phase: str | None = None) -> dict:
    status = {"reconciledAt": at} if at else {}
    if phase:
        status["operationState"] = {"phase": phase}
    return {"kind": "Application", "status": status}


def test_argo_is_reconciled_when_refreshed_since_the_release_and_no_sync_runs() -> None:
    assert reconciled(_argo("2026-12-05T17:00:00Z"), RELEASED)  # reconciledAt has whole seconds
    assert reconciled(_argo("2026-12-05T17:00:05Z", "Succeeded"), RELEASED)
    assert not reconciled(_argo("2026-12-05T16:59:59Z"), RELEASED)
    assert not reconciled(_argo("2026-12-05T17:00:05Z", "Running"), RELEASED)
    assert not reconciled(_argo(None), RELEASED)
