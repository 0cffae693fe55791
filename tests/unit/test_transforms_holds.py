"""A plan's transforms and the holds, on objects alone (no server): what each rewrites, and what it refuses."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from drtool.errors import UsageError
from drtool.kube.discovery import ResourceType
from drtool.kube.holds import COMPLETED, HELD, hold, release_patch
from drtool.kube.skips import object_rule
from drtool.kube.transforms import Transforms, unmatched
from drtool.plans.schema import Plan

PVC = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
STS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
FLAVOR = ResourceType("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False, crd=True)
JOB = ResourceType("batch", "v1", "jobs", "Job", namespaced=True)
TRAINJOB = ResourceType("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", namespaced=True, crd=True)
APP = ResourceType("argoproj.io", "v1alpha1", "applications", "Application", namespaced=True, crd=True)
RAYJOB = ResourceType("ray.io", "v1", "rayjobs", "RayJob", namespaced=True, crd=True)
JOBSET = ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True, crd=True)
H100 = "cloud.google.com/gke-accelerator=nvidia-h100-80gb"
A100 = "cloud.google.com/gke-accelerator=nvidia-a100-80gb"
GPU_MAP = {"node-labels": {H100: A100}}


def test_each_transform_rewrites_its_fields_and_records_them() -> None:
    engine = Transforms.parse(
        {
            "storage-classes": {"fast-ssd": "standard"},
            "image-registries": {"registry.ml.example.com": "registry.dr.example.com:5000"},
            "namespaces": {"team-nlp": "nlp-dr"},
            **GPU_MAP,
        }
    )
    found: list = []
    sts = {
        "metadata": {"name": "db", "namespace": "team-nlp"},
        "spec": {
            "volumeClaimTemplates": [{"spec": {"storageClassName": "fast-ssd"}}],
            "template": {
                "spec": {
                    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
                    "containers": [{"name": "c", "image": "registry.ml.example.com/nlp/llm:2.4.1"}],
                }
            },
        },
    }
    engine.apply(sts, STS, found)
    assert sts["metadata"]["namespace"] == "nlp-dr"
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "standard"
    pod = sts["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
    assert pod["containers"][0]["image"] == "registry.dr.example.com:5000/nlp/llm:2.4.1"
    flavor = {
        "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}},
    }
    engine.apply(flavor, FLAVOR, found)
    assert flavor["spec"]["nodeLabels"]["cloud.google.com/gke-accelerator"] == "nvidia-a100-80gb"
    lines = {r.line() for r in found}
    assert (
        "storage-classes fast-ssd -> standard: statefulsets.apps team-nlp/db "
        "spec.volumeClaimTemplates[0].spec.storageClassName: fast-ssd -> standard"
    ) in lines
    assert any(line.startswith(f"node-labels {H100} -> {A100}: resourceflavors.kueue.x-k8s.io h100") for line in lines)
    assert any(line.startswith("namespaces team-nlp -> nlp-dr: statefulsets.apps team-nlp/db") for line in lines)
    assert unmatched(engine, found) == []


def test_node_affinity_follows_the_pool_map() -> None:
    expr = {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-h100-80gb"]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expr]}]}}}  # fmt: skip
    job = {"metadata": {"name": "j", "namespace": "a"}, "spec": {"template": {"spec": {"affinity": affinity}}}}
    Transforms.parse(GPU_MAP).apply(job, JOB)
    assert expr["values"] == ["nvidia-a100-80gb"]


def test_a_rule_that_matches_nothing_is_named() -> None:
    engine = Transforms.parse({"storage-classes": {"fast-ssd": "standard", "slow-hdd": "standard"}})
    found: list = []
    engine.apply({"metadata": {"name": "c", "namespace": "a"}, "spec": {"storageClassName": "fast-ssd"}}, PVC, found)
    assert unmatched(engine, found) == ["storage-classes slow-hdd -> standard"]


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"storage-class": {"a": "b"}}, "unknown transform 'storage-class'"),
        ({"namespaces": {"a": "c", "b": "c"}}, "two namespaces onto one"),
        ({"node-labels": {"gpu=h100": "a100"}}, "is not a node label"),
        ({"storage-classes": {"a": "a"}}, "maps nothing"),
    ],
)
def test_bad_transforms_are_refused_in_one_line(block: dict, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        Transforms.parse(block)


def test_the_plan_schema_checks_its_transforms() -> None:
    steps = [{"id": "k", "uses": "kubernetes"}]
    plan = Plan.model_validate({"name": "p", "steps": steps, "transforms": GPU_MAP})
    assert plan.options_for(plan.steps[0], True)["transforms"] == GPU_MAP
    assert "transforms" not in plan.options_for(plan.steps[0], False)
    with pytest.raises(ValidationError, match="is not a node label"):
        Plan.model_validate({"name": "p", "steps": steps, "transforms": {"node-labels": {"x": "y"}}})


def test_a_job_is_held_and_released_to_the_backup_values() -> None:
    record = {"object": {"metadata": {"name": "j", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                         "spec": {"suspend": False}}}  # fmt: skip
    assert hold(record, JOB)
    obj = record["object"]
    assert obj["spec"]["suspend"] is True and "labels" not in obj["metadata"]
    patch, what = release_patch(obj)  # type: ignore[misc]
    # Kueue resumes it once it admits it again: the release gives the label back and leaves it suspended
    assert "spec" not in patch and patch["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "q"}
    assert patch["metadata"]["annotations"] == {HELD: None} and "queue-name" in what
    plain = {"object": {"metadata": {"name": "p", "namespace": "a"}, "spec": {"suspend": False}}}
    assert hold(plain, JOB) and release_patch(plain["object"])[0]["spec"] == {"suspend": False}  # type: ignore[index]


def test_a_completed_job_is_a_record_never_released() -> None:
    status = {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": "2026-12-01T00:00:00Z"}
    record = {"object": {"metadata": {"name": "j", "namespace": "a"}, "spec": {}}, "status": status}
    assert hold(record, JOB)
    assert record["object"]["metadata"]["annotations"][COMPLETED] == "2026-12-01T00:00:00Z"
    assert release_patch(record["object"]) is None


def test_a_completed_trainjob_or_jobset_is_a_record_never_released() -> None:
    """Trainer calls a finished TrainJob ``Complete``, JobSet a finished JobSet ``Completed``: restored, neither
    runs again; a running one (or one that failed) is held and released as any other."""
    when = "2026-12-01T00:00:00Z"
    for t, done in ((TRAINJOB, "Complete"), (JOBSET, "Completed")):
        status = {"conditions": [{"type": done, "status": "True", "lastTransitionTime": when}]}
        record = {"object": {"metadata": {"name": "llm", "namespace": "ml"}, "spec": {}}, "status": status}
        assert hold(record, t) and record["object"]["spec"]["suspend"] is True
        assert record["object"]["metadata"]["annotations"][COMPLETED] == when
        assert release_patch(record["object"]) is None
        failed = {"conditions": [{"type": "Failed", "status": "True"}, {"type": done, "status": "False"}]}
        running = {"object": {"metadata": {"name": "llm", "namespace": "ml"}, "spec": {}}, "status": failed}
        assert hold(running, t) and COMPLETED not in running["object"]["metadata"]["annotations"]
        assert release_patch(running["object"])[0]["spec"] == {"suspend": None}  # type: ignore[index]


def test_what_an_ai_operator_made_is_left_out_for_it_to_make_again() -> None:
    """A TrainJob's JobSet, a JobSet's Jobs, a RayJob's RayCluster: their operator makes them again from the
    restored (held) object; a restored copy would run unheld. Another owner's children are restored."""

    def owned(api_version: str, controller: bool = True) -> dict:
        ref = {"apiVersion": api_version, "kind": "K", "name": "o", "uid": "u", "controller": controller}
        return {"metadata": {"name": "x", "namespace": "ml", "ownerReferences": [ref]}}

    made = {
        "trainer.kubeflow.org/v1alpha1": "Kubeflow Trainer",
        "jobset.x-k8s.io/v1alpha2": "JobSet",
        "ray.io/v1": "KubeRay",
    }
    for api_version, who in made.items():
        for key in ("jobsets.jobset.x-k8s.io", "jobs.batch", "services"):
            assert who in (object_rule(key)(owned(api_version)) or ""), (api_version, key)
        assert object_rule("jobs.batch")(owned(api_version, controller=False)) is None
    assert object_rule("jobs.batch")(owned("apps/v1")) is None and object_rule("jobs.batch")({"metadata": {}}) is None


def test_owned_objects_follow_their_owner_and_argo_sync_is_held() -> None:
    owned = {"object": {"metadata": {"name": "j"}, "spec": {"suspend": False}}, "owners": [{"uid": "x"}]}
    assert not hold(owned, TRAINJOB) and owned["object"]["spec"]["suspend"] is False
    automated = {"prune": True, "selfHeal": True}
    app = {
        "object": {"metadata": {"name": "a", "namespace": "argocd"}, "spec": {"syncPolicy": {"automated": automated}}}
    }
    assert hold(app, APP)
    assert app["object"]["spec"]["syncPolicy"] == {}
    assert json.loads(app["object"]["metadata"]["annotations"][HELD]) == {"spec.syncPolicy.automated": automated}
    patch, _ = release_patch(app["object"])  # type: ignore[misc]
    assert patch["spec"]["syncPolicy"]["automated"] == automated


def test_a_rayjob_is_held_in_the_form_kuberay_accepts() -> None:
    """KubeRay marks a suspended RayJob whose cluster outlives its job ValidationFailed for good: held, its cluster
    is shut down with the job, and the release puts the backup's choice back."""
    record = {"object": {"metadata": {"name": "etl", "namespace": "ml"}, "spec": {"entrypoint": "python x.py"}}}
    assert hold(record, RAYJOB)
    assert record["object"]["spec"] == {"entrypoint": "python x.py", "suspend": True, "shutdownAfterJobFinishes": True}
    patch, what = release_patch(record["object"])  # type: ignore[misc]
    assert patch["spec"] == {"suspend": None, "shutdownAfterJobFinishes": None}
    assert what == "spec.shutdownAfterJobFinishes=null, spec.suspend=null"
    selector = {"object": {"metadata": {"name": "q"}, "spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}}
    assert not hold(selector, RAYJOB) and "suspend" not in selector["object"]["spec"]  # its RayCluster is held
