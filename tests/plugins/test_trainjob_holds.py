"""A TrainJob restored into a cluster running the real Kubeflow Trainer and JobSet controllers runs no pod until a
plan releases it, then resumes from the restored checkpoint.

One living lab (API server, controller-manager, scheduler, kwok's nodes, MinIO) runs Kubeflow Trainer v2.2.0's
controller manager and JobSet v0.11.1's controller, built from their pinned modules (opt-in lab component
``trainer``). The source: the lab trainer trained run ``mlp`` in MinIO and was killed while saving step 30
(complete checkpoints at 10 and 20, a torn one at 30), and a TrainJob runs it (Trainer made its JobSet, JobSet
its Job and pod). drtool backs up the checkpoints and the namespace; then the disaster: the namespace and every
checkpoint are deleted. The restore writes the checkpoints back, and the TrainJob held: Trainer gives the
suspended TrainJob a suspended JobSet, JobSet gives it a suspended Job, and no pod exists. The release lets
them run: the pod is the lab node's (label ``drtool.dev/check``, lab/node.py), which runs the real lab trainer
in it, and the trainer reports the step it resumed from: 20, the restored checkpoint (the torn 30 was not
backed up). Then the finished run (Trainer marks it ``Complete``) is backed up and restored once more, into
another namespace: it comes back as a record (``drtool.dev/completed``), the release leaves it held, and no
pod runs. In the source phase the lab has no node for such pods (it is started for the restored cluster),
so the source's pod waits, as a pod pulling its image would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab import training
from drtool_lab.components.minio import MinioServer
from drtool_lab.gomods import BINARIES
from drtool_lab.lab import BARE_KINDS
from drtool_plugins.checkpoints.resume_check import CHECK_LABEL
from kubernetes import client

from drtool.kube.holds import COMPLETED, HELD
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, start_kube_lab, wait_for

KINDS = (*BARE_KINDS, "kube-controller-manager", "kube-scheduler", "kwok", "minio", "trainer")  # trainer brings jobset
NS = "ml"
AGAIN = "ml-again"  # where the finished run is restored once more
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
BUCKET, PREFIX = "training", "runs"
kube_plugin, checkpoints_plugin = get_plugin("kubernetes"), get_plugin("checkpoints")

pytestmark = pytest.mark.skipif(
    not all(BINARIES[b].path.is_file() for b in ("trainer-controller-manager", "jobset")),
    reason="Kubeflow Trainer and JobSet are not built: python -m drtool_lab.build trainer-controller-manager jobset "
    "(tests/run.sh does; docs/lab-builds.md)",
)


@pytest.fixture(scope="module")
def lab(lab_root: Path) -> Iterator[KubeLab]:
    kube = start_kube_lab(lab_root, "trainjob", kinds=KINDS)
    yield kube
    kube.lab.down()


def _runtime() -> dict[str, Any]:
    """A ClusterTrainingRuntime for the lab trainer: one node, its pod the lab node's to run."""
    pod = {
        "metadata": {"labels": {CHECK_LABEL: "trainjob"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "drtool"}]},
    }
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"backoffLimit": 0, "template": pod},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "lab-trainer"},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


def _trainjob(location: dict[str, str]) -> dict[str, Any]:
    env = {"DRTOOL_CHECKPOINTS": json.dumps(location), "DRTOOL_CHECKPOINTS_FOLDER": training.RUN_FOLDER}
    trainer = {
        "command": ["python", "-m", "drtool_lab.trainer"],
        "args": ["resume", "--steps", "3", "--report", "/dev/termination-log"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    runtime = {"name": "lab-trainer", "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "mlp"},
        "spec": {"runtimeRef": runtime, "trainer": trainer},
    }


def _items(custom: Any, api: tuple[str, str], plural: str, ns: str = NS) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(*api, ns, plural)["items"]


def _trainjob_when(custom: Any, ns: str, condition: str) -> dict[str, Any] | None:
    """The TrainJob ``mlp`` in ``ns`` once its ``condition`` is True (None before)."""
    trainjob = custom.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "mlp")
    return trainjob if _condition(trainjob, condition) == "True" else None


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0]["status"] if found else None


def test_restored_trainjob_runs_nothing_until_released_then_resumes_from_the_restored_checkpoint(
    lab: KubeLab, repo: Repository
) -> None:
    minio = lab.lab.first("minio")
    assert isinstance(minio, MinioServer)
    minio.create_bucket(BUCKET)
    s3 = {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}
    location = {"url": f"s3://{BUCKET}/{PREFIX}", **s3}
    run = training.torn_run(lab.lab, location)
    assert run.saved == (10, 20) and run.torn == 30
    with lab.api_client() as api:
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", _runtime())
        core.create_namespace({"metadata": {"name": NS}})
        custom.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", _trainjob(location))
        wait_for(lambda: core.list_namespaced_pod(NS).items, "Trainer, JobSet and the Job making the source's pod", 180)
        (jobset,) = _items(custom, JOBSET, "jobsets")
        assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob" and not jobset["spec"].get("suspend")

        with BackupSession(repo) as session:
            sources = {"sources": [{"name": "training", **location}]}
            assert session.run_plugin(checkpoints_plugin, sources).status == "ok"
            cluster = {"kubeconfig": lab.kubeconfig, "include_namespaces": [NS]}
            assert session.run_plugin(kube_plugin, cluster).status == "ok"
            manifest = session.commit()

        # the disaster: the run's namespace and its checkpoints are gone
        core.delete_namespace(NS)
        wait_for(lambda: NS not in {n.metadata.name for n in core.list_namespace().items}, "the namespace gone", 180)
        s3_client = minio.client()
        listed = s3_client.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("Contents") or []
        for obj in listed:
            s3_client.delete_object(Bucket=BUCKET, Key=obj["Key"])
        lab.lab.up(["lab-node"])  # the restored cluster's node runs the trainer's pods

        restored = run_restore(repo, manifest, checkpoints_plugin, location)
        assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
        restored = run_restore(repo, manifest, kube_plugin, {"kubeconfig": lab.kubeconfig}, options={"settle": 5})
        assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
        assert restored.result.details["held"] == [f"TrainJob {NS}/mlp"]

        def held_jobs() -> list[Any]:  # JobSet has made the suspended JobSet's Job, suspended
            return [j for j in batch.list_namespaced_job(NS).items if j.spec.suspend]

        trainjob = wait_for(lambda: _trainjob_when(custom, NS, "Suspended"), "Trainer settling the held TrainJob", 120)
        assert trainjob["spec"]["suspend"] is True and HELD in trainjob["metadata"]["annotations"]
        (jobset,) = wait_for(lambda: _items(custom, JOBSET, "jobsets"), "Trainer making the held TrainJob's JobSet", 99)
        assert jobset["spec"]["suspend"] is True  # made by Trainer from the restored TrainJob, held with it
        assert jobset["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
        wait_for(held_jobs, "JobSet making the suspended JobSet's Job, suspended", 120)
        assert not core.list_namespaced_pod(NS).items  # nothing runs

        released = run_restore(repo, manifest, kube_plugin, {"kubeconfig": lab.kubeconfig}, options={"release": True})
        assert released.verified, [(c.name, c.detail) for c in released.checks if not c.ok]
        assert released.result.summary.startswith("released 1 held object(s)"), released.result.summary

        def finished() -> list[Any]:
            pods = core.list_namespaced_pod(NS).items
            return [p for p in pods if p.status.phase in ("Succeeded", "Failed")]

        (pod,) = wait_for(finished, "the lab node running the released TrainJob's trainer", 240)
        (state,) = pod.status.container_statuses
        assert pod.status.phase == "Succeeded", state.state.terminated.message
        report = json.loads(state.state.terminated.message)
        assert report["resumed_from_step"] == 20  # the restored checkpoint; the torn 30 was never backed up
        assert len(report["losses"]) == 3

        # the finished run, backed up and restored once more (another namespace): a record, never run again
        wait_for(lambda: _trainjob_when(custom, NS, "Complete"), "Trainer marking the resumed TrainJob Complete", 120)
        with BackupSession(repo) as session:
            assert session.run_plugin(kube_plugin, cluster).status == "ok"
            finished_run = session.commit()
        core.create_namespace({"metadata": {"name": AGAIN}})
        options = {"transforms": {"namespaces": {NS: AGAIN}}}
        target = {"kubeconfig": lab.kubeconfig}
        record = run_restore(repo, finished_run, kube_plugin, target, options={**options, "settle": 5})
        assert record.verified, [(c.name, c.detail) for c in record.checks if not c.ok]
        trainjob = wait_for(lambda: _trainjob_when(custom, AGAIN, "Suspended"), "Trainer settling the record", 120)
        assert COMPLETED in trainjob["metadata"]["annotations"] and trainjob["spec"]["suspend"] is True
        released = run_restore(repo, finished_run, kube_plugin, target, options={**options, "release": True})
        assert "released 0 held object(s)" in released.result.summary, released.result.summary
        assert "1 completed Job(s) kept as records, not re-run" in released.result.summary
        assert all(js["spec"]["suspend"] for js in _items(custom, JOBSET, "jobsets", AGAIN))  # none, or held
        assert not core.list_namespaced_pod(AGAIN).items
