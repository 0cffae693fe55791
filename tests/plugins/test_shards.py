"""A sharded backup as an Indexed Job runs it (docs/scaling.md), on a real Job controller and a real MinIO.

The Job from manifests/sharded/ is applied server-side to a lab that runs kube-controller-manager's Job
controller, which creates one pod per completion index. No kubelet runs here, so the test plays it: each
worker is started from its pod as the API server returns it (the container's args after the image's
entrypoint, its env with the fieldRefs resolved against the pod: the Job's uid, and the
JOB_COMPLETION_INDEX the controller injected), and its exit is written back to the pod's status. One worker
is killed after its first pack landed: its pod fails, the controller creates the index's replacement pod
(backoffLimitPerIndex), and nothing is published until that pod's worker finishes; the rerun reuses the pack
that landed, and the Job ends Complete with every index succeeded. The sharded restore writes the
checkpoint's marker only when the last worker is done.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.kube.readings import is_true
from drtool.repo import layout
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab, wait_for
from tests.fixtures.manifests import MANIFESTS, kubectl
from tests.fixtures.noise import noise

MIB = 1 << 20
WORKERS = 3
SHARD_MIB = 32
JOB = MANIFESTS / "sharded" / "job-backup-checkpoints.yaml"
NAMESPACE = "drtool"
INDEX = "batch.kubernetes.io/job-completion-index"
FIELD = re.compile(r"metadata\.(?:(labels|annotations)\['([^']+)'\]|(name|namespace|uid))$")
Obj = dict[str, Any]


class Kubelet:
    """What a kubelet does with the Job's pods, for pods no node runs: start the container from the pod as the
    API server returns it, and report its exit in the pod's status (the Job controller counts pods by it)."""

    def __init__(self, kube: KubeLab, job: Obj, host_env: dict[str, str]) -> None:
        self.kube, self.job, self.host_env = kube, job, host_env

    def _kubectl(self, *args: str) -> str:
        proc = kubectl("-n", NAMESPACE, *args, kubeconfig=self.kube.kubeconfig)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def pending(self) -> dict[int, Obj]:
        """The Job's pods waiting for a kubelet, by completion index."""
        selector = f"batch.kubernetes.io/controller-uid={self.job['metadata']['uid']}"
        pods = json.loads(self._kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
        return {int(p["metadata"]["annotations"][INDEX]): p for p in pods if p["status"].get("phase") == "Pending"}

    def wait_pending(self, indexes: set[int], not_these: frozenset[str] = frozenset()) -> dict[int, Obj]:
        """Until the Job controller has created a pod for each of ``indexes`` (none of the pods ``not_these``)."""

        def ready() -> dict[int, Obj] | None:
            pods = {i: p for i, p in self.pending().items() if p["metadata"]["uid"] not in not_these}
            return pods if indexes <= set(pods) else None

        return wait_for(ready, f"the Job controller's pods for indexes {sorted(indexes)}", timeout=60)

    def start(self, pod: Obj, local: dict[str, str | None]) -> subprocess.Popen[str]:
        """The container's process: the image's entrypoint (`drtool`, Containerfile) with the pod's args, and
        the pod's env over this host's (``local`` replaces what points into the pod's mounts; None unsets)."""
        (container,) = pod["spec"]["containers"]
        assert "command" not in container  # the image's entrypoint runs
        env = {var["name"]: _value(pod, var) for var in container["env"]}
        assert env["JOB_COMPLETION_INDEX"] == pod["metadata"]["annotations"][INDEX]  # injected by the controller
        env = {k: v for k, v in (self.host_env | env | local).items() if v is not None}
        argv = [sys.executable, "-m", "drtool", *container["args"]]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._status(pod, "Running", {"running": {"startedAt": _now()}})
        return proc

    def exited(self, pod: Obj, returncode: int) -> None:
        code = 128 - returncode if returncode < 0 else returncode  # killed by a signal: 128 + its number
        state = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": _now()}
        self._status(pod, "Succeeded" if code == 0 else "Failed", {"terminated": state | {"startedAt": _now()}})

    def _status(self, pod: Obj, phase: str, state: Obj) -> None:
        (container,) = pod["spec"]["containers"]
        status = {"name": container["name"], "image": container["image"], "imageID": "", "ready": phase == "Running",
                  "restartCount": 0, "state": state}  # fmt: skip
        patch = {"status": {"phase": phase, "containerStatuses": [status]}}
        self._kubectl("patch", "pod", pod["metadata"]["name"], "--subresource=status", "--type=merge",
                      "-p", json.dumps(patch))  # fmt: skip


def _value(pod: Obj, var: Obj) -> str:
    """An env var's value as the kubelet resolves it: literal, or a fieldRef into the pod's metadata."""
    if "value" in var:
        return str(var["value"])
    match = FIELD.match(var["valueFrom"]["fieldRef"]["fieldPath"])
    assert match, var
    meta = pod["metadata"]
    return str(meta[match[1]][match[2]] if match[1] else meta[match[3]])


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def applied_job(kube_jobs: KubeLab) -> Obj:
    """The Job applied server-side; read back as the API server keeps it (with the controller's labels)."""
    config = kube_jobs.kubeconfig
    assert kubectl("create", "namespace", NAMESPACE, kubeconfig=config).returncode == 0
    # ServiceAccount admission runs with a controller-manager: the pods' ServiceAccount must exist
    assert kubectl("-n", NAMESPACE, "create", "serviceaccount", "drtool-backup", kubeconfig=config).returncode == 0
    doc = yaml.safe_load(JOB.read_text())
    doc["spec"]["completions"] = doc["spec"]["parallelism"] = WORKERS
    env = doc["spec"]["template"]["spec"]["containers"][0]["env"]
    next(v for v in env if v["name"] == "DRTOOL_SHARDS")["value"] = str(WORKERS)
    proc = kubectl(
        "-n", NAMESPACE, "apply", "--server-side", "--field-manager=drtool-test", "-f", "-",
        kubeconfig=config, stdin=yaml.safe_dump(doc),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = kubectl("-n", NAMESPACE, "get", "job", doc["metadata"]["name"], "-o", "json", kubeconfig=config)
    job = json.loads(got.stdout)
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/controller-uid"] == job["metadata"]["uid"]  # set by the API server
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimitPerIndex"] == 2
    return job


def _completed(kube: KubeLab, job: Obj) -> Obj | None:
    got = kubectl("-n", NAMESPACE, "get", "job", job["metadata"]["name"], "-o", "json", kubeconfig=kube.kubeconfig)
    live = json.loads(got.stdout)
    return live["status"] if is_true(live, "Complete") else None


def test_indexed_job_workers_publish_one_backup_only_when_every_shard_is_durable(
    kube_jobs: KubeLab, applied_job: Obj, s3_store_url: str, minio_env: dict[str, str], cli: Cli, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt" / "step-100"
    ckpt.mkdir(parents=True)
    for i in range(6):  # each worker's share spans several packs, so one can land before the worker is killed
        (ckpt / f"model-{i:05d}-of-00006.bin").write_bytes(noise(SHARD_MIB * MIB, i))
    (ckpt / "COMPLETE").write_bytes(b"")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"store": s3_store_url, "sources": {"checkpoints": {"path": str(tmp_path / "ckpt")}}})
    )
    cli.env |= minio_env
    cli("init", "--store", s3_store_url, "--no-save", check=True)
    local: dict[str, str | None] = {  # what points into the pod's mounts, or at a real S3
        "DRTOOL_CONFIG": str(config),
        "DRTOOL_PASSPHRASE_FILE": "",
        "AWS_ENDPOINT_URL": minio_env["AWS_ENDPOINT_URL"],
        "AWS_SHARED_CREDENTIALS_FILE": None,
        "HOME": str(cli.home),
    }
    repo = Repository.open(open_backend(s3_store_url), Credentials(passphrase=PASSPHRASE))
    kubelet = Kubelet(kube_jobs, applied_job, cli.env)
    pods = kubelet.wait_pending(set(range(WORKERS)))  # the Job controller created one pod per index

    # worker 1 is killed once its first pack is in the store
    victim = kubelet.start(pods[1], local)
    deadline = time.monotonic() + 120
    while not list(repo.backend.list(layout.PACKS)) and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert victim.poll() is None, "worker 1 finished before the test could kill it"
    victim.send_signal(signal.SIGKILL)
    kubelet.exited(pods[1], victim.wait())
    landed = set(repo.backend.list(layout.PACKS))
    assert landed, "the worker died before uploading a pack: the test would not show reuse"
    others = {i: kubelet.start(pods[i], local) for i in (0, 2)}
    outputs = []
    for i, proc in others.items():
        out, err = proc.communicate(timeout=300)
        kubelet.exited(pods[i], proc.returncode)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out))
    assert not any(o["published"] for o in outputs)
    assert repo.backup_ids() == []  # two of three shards durable: nothing visible
    assert json.loads(cli("--store", s3_store_url, "list", "--json", check=True).stdout) == []

    # backoffLimitPerIndex: the Job controller replaces index 1's failed pod (after its back-off, about 10 s)
    retry = kubelet.wait_pending({1}, not_these=frozenset({pods[1]["metadata"]["uid"]}))[1]
    assert retry["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] == "1"
    rerun = kubelet.start(retry, local)
    out, err = rerun.communicate(timeout=300)
    kubelet.exited(retry, rerun.returncode)
    assert rerun.returncode == 0, err
    result = json.loads(out)
    assert result["published"] and result["status"] == "complete"
    assert 0 <= result["commit_seconds"] < 30  # measured by the worker that published
    job_status = wait_for(lambda: _completed(kube_jobs, applied_job), "the Job Complete", timeout=60)
    assert job_status["succeeded"] == WORKERS and job_status["failed"] == 1
    assert job_status["completedIndexes"] == f"0-{WORKERS - 1}"
    (backup_id,) = repo.backup_ids()
    manifest = repo.get_manifest(backup_id)
    assert manifest.stats["shards"] == WORKERS
    assert {a.meta["key"] for a in manifest.artifacts} == {f"step-100/{p.name}" for p in ckpt.iterdir()}
    assert manifest.stats["bytes_stored"] < 6 * SHARD_MIB * MIB  # the packs the killed worker landed were reused
    assert landed <= set(repo.backend.list(layout.PACKS))
    assert list(repo.backend.list(layout.JOBS)) == []  # the parts go once the backup is published
    assert json.loads(cli("--store", s3_store_url, "check", "--read-data", "--json", check=True).stdout)["ok"]

    # a sharded restore: the marker appears only once the last worker's data landed
    target = tmp_path / "restored"
    restore = ["shard", "restore", backup_id, "-p", "checkpoints", "-t", f"path={target}", "--json"]
    shard_env = {"DRTOOL_JOB": "restore-1", "DRTOOL_SHARDS": "2", "DRTOOL_CONFIG": str(config)}
    first = json.loads(
        cli("--store", s3_store_url, *restore, env=shard_env | {"JOB_COMPLETION_INDEX": "0"}, check=True).stdout
    )
    assert not first["committed"] and not (target / "step-100" / "COMPLETE").exists()
    last = json.loads(
        cli("--store", s3_store_url, *restore, env=shard_env | {"JOB_COMPLETION_INDEX": "1"}, check=True).stdout
    )
    assert last["committed"] and all(c["ok"] for c in last["checks"])
    for original in ckpt.iterdir():
        assert (target / "step-100" / original.name).read_bytes() == original.read_bytes()
    assert not any(p.is_file() for p in (target / ".drtool-shards").rglob("*"))  # the done markers are gone
