"""When Kueue's verdict on a ClusterQueue is settled, so that a verify (and the lab's seed, before a backup
records the source's verdicts) waits for it instead of judging a passing moment. In CI a drill's verify
compared the restored cq-nlp with a source verdict read too early."""

from __future__ import annotations

from typing import Any

from drtool_plugins.kueue.verdicts import active_checks, check_states, unsettled

from drtool.kube.readings import status_by_controller

FLAVORS = {"h100", "spare"}


def queue(status: str | None, reason: str = "Ready", generation: int = 1, seen: int = 1) -> dict[str, Any]:
    """cq-nlp as the seed makes it: quota of h100 and spare, the AdmissionCheck gpu-provisioning on h100."""
    cq: dict[str, Any] = {
        "metadata": {"name": "cq-nlp", "generation": generation},
        "spec": {
            "resourceGroups": [{"flavors": [{"name": "h100"}, {"name": "spare"}]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "gpu-provisioning", "onFlavors": ["h100"]}]},
        },
    }
    if status is not None:
        condition = {"type": "Active", "status": status, "reason": reason, "observedGeneration": seen}
        cq["status"] = {"conditions": [condition]}
    return cq


def check(active: bool | None) -> dict[str, Any]:
    conditions = [] if active is None else [{"type": "Active", "status": str(active)}]
    return {"metadata": {"name": "gpu-provisioning"}, "status": {"conditions": conditions or None}}


def test_a_verdict_that_contradicts_what_exists_is_not_settled() -> None:
    inactive, active = active_checks([check(False)]), active_checks([check(True)])
    assert unsettled(queue(None), FLAVORS, active) == "cq-nlp: no verdict yet"
    assert "generation 1" in str(unsettled(queue("True", generation=2), FLAVORS, active))
    assert "FlavorNotFound" in str(unsettled(queue("False", "FlavorNotFound"), FLAVORS, active))
    assert "AdmissionCheckNotFound" in str(unsettled(queue("False", "AdmissionCheckNotFound"), FLAVORS, inactive))
    # the check's controller reported it Active after Kueue judged the queue: Kueue will say Active
    assert "are Active" in str(unsettled(queue("False", "AdmissionCheckInactive"), FLAVORS, active))
    assert "gpu-provisioning is not" in str(unsettled(queue("True"), FLAVORS, inactive))


def test_a_verdict_that_matches_what_exists_is_settled() -> None:
    inactive, active = active_checks([check(None)]), active_checks([check(True)])
    assert unsettled(queue("True"), FLAVORS, active) is None
    # the lab's cq-nlp: no provisioner reports gpu-provisioning Active, so Kueue holds the queue inactive
    assert unsettled(queue("False", "AdmissionCheckInactive"), FLAVORS, inactive) is None
    assert unsettled(queue("False", "FlavorNotFound"), {"spare"}, active) is None
    assert unsettled(queue("False", "AdmissionCheckNotFound"), FLAVORS, {}) is None
    assert check_states(queue("False"), inactive) == (
        "AdmissionCheck gpu-provisioning: not Active (its controller has not reported it Active)"
    )


def written_by(*entries: tuple[str, str | None]) -> dict[str, Any]:
    """cq-nlp with a verdict, its status fields held by (manager, subresource) entries, as the server records."""
    cq = queue("True")
    fields = [{"manager": m, "operation": "Update", **({"subresource": s} if s else {})} for m, s in entries]
    cq["metadata"]["managedFields"] = fields
    return cq


def test_a_verdict_copied_by_a_restore_is_not_a_controllers() -> None:
    """A verify waits for Kueue's verdicts only where a Kueue controller has judged in the target: a verdict the
    kubernetes plugin restored with the queue's status is the source's, and a bare target (no Kueue running)
    waited two minutes for a controller that never came (tests/plugins/test_kubernetes_transforms.py: 138 s)."""
    assert not status_by_controller(queue("True"))
    assert not status_by_controller(written_by(("drtool", None), ("drtool", "status")))
    assert not status_by_controller(written_by(("drtool-check", "status")))
    assert not status_by_controller(written_by(("kueue", None)))  # its spec, not a verdict
    assert status_by_controller(written_by(("drtool", "status"), ("kueue", "status")))
