"""Field ownership read from managedFields, and an object judged field by field by who wrote what.

Pure functions, on managedFields as kube-apiserver 1.37 writes them (the shapes below were read from the
living lab: a Deployment created by one client, annotated by the deployment controller through /status,
a Job whose pod template Kueue rewrote on admission). The restores that produce them for real are in
tests/plans_rehearsal/test_living_restore.py.
"""

from __future__ import annotations

import copy
from typing import Any

from drtool.kube.fields import flatten, list_kinds, managers, show
from drtool.kube.judge import ADDED, DRIFT, FOREIGN_WRITE, STATUS, judge

Obj = dict[str, Any]


def entry(manager: str, operation: str, fields: Obj, subresource: str = "") -> Obj:
    out = {"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": fields}
    out["time"] = "2026-12-01T16:36:40Z"
    return out | ({"subresource": subresource} if subresource else {})


CONTAINER = {"name": "server", "image": "registry.ml.example.com/nlp/llm-trainer:2.4.1"}
DEPLOYMENT: Obj = {
    "metadata": {"name": "model-server", "namespace": "team-nlp", "labels": {"app": "model-server"}},
    "spec": {
        "replicas": 2,
        "template": {"spec": {"containers": [CONTAINER], "tolerations": [{"key": "nvidia.com/gpu"}]}},
    },
}
RESTORED = entry(
    "drtool",
    "Apply",
    {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {
                    "f:containers": {'k:{"name":"server"}': {".": {}, "f:image": {}, "f:name": {}}},
                    "f:tolerations": {},
                }
            },
        },
    },
)


def live(obj: Obj, *entries: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["managedFields"] = list(entries)
    return out


def test_lists_are_cut_as_the_managers_cut_them() -> None:
    kinds = list_kinds(managers(live(DEPLOYMENT, RESTORED)))
    assert kinds == {("f:spec", "f:template", "f:spec", "f:containers"): ("k", "name")}
    leaves = dict(flatten(DEPLOYMENT, kinds))
    image = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"server"}', "f:image")
    assert leaves[image] == CONTAINER["image"]
    assert leaves[("f:spec", "f:template", "f:spec", "f:tolerations")] == [{"key": "nvidia.com/gpu"}]  # atomic
    assert show(image) == "spec.template.spec.containers[name=server].image"
    assert show(("f:metadata", "f:annotations", "f:deployment.kubernetes.io/revision")) == (
        'metadata.annotations["deployment.kubernetes.io/revision"]'
    )
    sets = list_kinds(managers(live(DEPLOYMENT, entry("kueue", "Update", {"f:metadata": {"f:finalizers": {
        '.': {}, 'v:"kueue.x-k8s.io/resource-in-use"': {}}}}))))  # fmt: skip
    assert sets == {("f:metadata", "f:finalizers"): ("v",)}


def test_what_the_restore_wrote_and_still_holds_is_equal() -> None:
    target = live(DEPLOYMENT, RESTORED)
    assert judge("team-nlp/model-server", DEPLOYMENT, DEPLOYMENT, target).changes == ()


def test_another_manager_changing_a_restored_field_is_drift_naming_it() -> None:
    scaled = copy.deepcopy(DEPLOYMENT)
    scaled["spec"]["replicas"] = 5
    hpa = entry("horizontal-pod-autoscaler", "Update", {"f:spec": {"f:replicas": {}}})
    restored = copy.deepcopy(RESTORED)
    del restored["fieldsV1"]["f:spec"]["f:replicas"]  # an Update that changes a field takes it from its owner
    verdict = judge("team-nlp/model-server", DEPLOYMENT, scaled, live(scaled, restored, hpa))
    (change,) = verdict.changes
    assert change.kind == DRIFT and not verdict.ok
    assert change.line() == (
        "spec.replicas: backup 2, target 5 by horizontal-pod-autoscaler (Update, 2026-12-01T16:36:40Z)"
    )


def test_what_other_managers_add_is_listed_not_failed() -> None:
    annotated = copy.deepcopy(DEPLOYMENT)
    annotated["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id": "ml"}
    annotated["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy:1.31"})
    argo = entry("argocd-controller", "Update", {"f:metadata": {"f:annotations": {
        ".": {}, "f:argocd.argoproj.io/tracking-id": {}}}})  # fmt: skip
    webhook = entry("istio-sidecar-injector", "Update", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"sidecar"}': {".": {}, "f:image": {}, "f:name": {}}}}}}})  # fmt: skip
    verdict = judge("k", DEPLOYMENT, annotated, live(annotated, RESTORED, argo, webhook))
    assert verdict.ok and {c.kind for c in verdict.changes} == {ADDED}
    lines = sorted(c.line() for c in verdict.changes)
    assert lines[0].startswith("metadata.annotations[\"argocd.argoproj.io/tracking-id\"] = 'ml' by argocd-controller")
    assert (
        lines[1].startswith("spec.template.spec.containers[name=sidecar] = ") and "istio-sidecar-injector" in lines[1]
    )


def test_a_field_drtool_wrote_from_another_state_fails() -> None:
    other = copy.deepcopy(DEPLOYMENT)
    other["metadata"]["labels"]["tier"] = "gold"
    mine = copy.deepcopy(RESTORED)
    mine["fieldsV1"]["f:metadata"]["f:labels"]["f:tier"] = {}
    (change,) = judge("k", DEPLOYMENT, other, live(other, mine)).changes
    assert change.kind == FOREIGN_WRITE and change.failing and "by drtool (Apply" in change.line()


def test_a_removed_field_and_an_empty_map_the_target_filled() -> None:
    backup = copy.deepcopy(DEPLOYMENT)
    backup["metadata"]["annotations"] = {}
    gone = copy.deepcopy(DEPLOYMENT)
    del gone["metadata"]["labels"]
    gone["metadata"]["annotations"] = {"note": "x"}
    added, removed = sorted(judge("k", backup, gone, live(gone)).changes, key=lambda c: c.kind)
    assert added.kind == ADDED and removed.kind == DRIFT
    assert removed.line() == "metadata.labels.app: backup 'model-server', target (absent) removed"


def test_status_a_controller_keeps_current_is_listed() -> None:
    backup = {
        "metadata": {"name": "cq"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]},
    }
    now = copy.deepcopy(backup)
    now["status"]["conditions"][0]["reason"] = "Ready2"
    kueue = entry("kueue", "Update", {"f:status": {"f:conditions": {".": {}, 'k:{"type":"Active"}': {
        ".": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}}, "status")  # fmt: skip
    (change,) = judge("cq", backup, now, live(now, kueue)).changes
    assert change.kind == STATUS and not change.failing
    assert show(change.path) == "status.conditions[type=Active].reason"


def test_a_status_field_its_controller_dropped_is_listed_and_one_nobody_keeps_fails() -> None:
    """A held RayJob: KubeRay reports its deployment status and clears the dashboard URL the source showed."""
    backup = {"metadata": {"name": "etl"}, "status": {"jobDeploymentStatus": "Running", "dashboardURL": "etl:8265"}}
    now = {"metadata": {"name": "etl"}, "status": {"jobDeploymentStatus": "Suspended"}}
    operator = entry("kuberay-operator", "Update", {"f:status": {"f:jobDeploymentStatus": {}}}, "status")
    changes = judge("etl", backup, now, live(now, operator)).changes
    assert {show(c.path): c.kind for c in changes} == {
        "status.jobDeploymentStatus": STATUS,
        "status.dashboardURL": STATUS,
    }
    assert not any(c.failing for c in changes)
    (nobody,) = judge("etl", backup, now | {"status": {"jobDeploymentStatus": "Running"}}, live(now)).changes
    assert nobody.kind == DRIFT and nobody.failing


def test_an_applied_empty_map_owns_the_map_not_what_others_put_in_it() -> None:
    annotated = copy.deepcopy(DEPLOYMENT)
    annotated["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id": "ml"}
    mine = copy.deepcopy(RESTORED)
    mine["fieldsV1"]["f:metadata"]["f:annotations"] = {}  # drtool applied `annotations: {}`
    argo = entry("argocd-controller", "Update", {"f:metadata": {"f:annotations": {
        "f:argocd.argoproj.io/tracking-id": {}}}})  # fmt: skip
    (change,) = judge("k", DEPLOYMENT, annotated, live(annotated, mine, argo)).changes
    assert change.kind == ADDED and change.owners == ("argocd-controller (Update, 2026-12-01T16:36:40Z)",)
