"""A sharded backup as an Indexed Job runs it (docs/scaling.md), on a real kube-apiserver and a real MinIO.

The Job from manifests/sharded/ is applied server-side to a lab API server; its pods are then started the way
the Job controller would start them: the container's own command and env, with JOB_COMPLETION_INDEX set and
the downward-API job id resolved to the applied Job's uid. One worker is killed after its first pack landed:
nothing is published until a rerun of that index finishes, and the rerun reuses the pack that landed. The
sharded restore writes the checkpoint's marker only when the last worker is done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.repo import layout
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab
from tests.fixtures.manifests import MANIFESTS, kubectl

MIB = 1 << 20
WORKERS = 3
SHARD_MIB = 32
JOB = MANIFESTS / "sharded" / "job-backup-checkpoints.yaml"


def worker_command(job: dict) -> tuple[list[str], dict[str, str]]:
    """The pod template's command and the env the kubelet would give it (fieldRefs resolved, paths local)."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            label = path.removeprefix("metadata.labels['").removesuffix("']")
            env[var["name"]] = job["spec"]["template"]["metadata"]["labels"][label]
    return [sys.executable, "-m", "drtool", *container["args"]], env


@pytest.fixture
def applied_job(kube_target: KubeLab) -> dict:
    """The Job applied server-side; read back as the API server keeps it (with the controller's labels)."""
    assert kubectl("create", "namespace", "drtool", kubeconfig=kube_target.kubeconfig).returncode == 0
    doc = yaml.safe_load(JOB.read_text())
    doc["spec"]["completions"] = doc["spec"]["parallelism"] = WORKERS
    env = doc["spec"]["template"]["spec"]["containers"][0]["env"]
    next(v for v in env if v["name"] == "DRTOOL_SHARDS")["value"] = str(WORKERS)
    proc = kubectl(
        "-n", "drtool", "apply", "--server-side", "--field-manager=drtool-test", "-f", "-",
        kubeconfig=kube_target.kubeconfig, stdin=yaml.safe_dump(doc),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = kubectl(
        "-n", "drtool", "get", "job", doc["metadata"]["name"], "-o", "json", kubeconfig=kube_target.kubeconfig
    )
    job = json.loads(got.stdout)
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/controller-uid"] == job["metadata"]["uid"]  # set by the API server
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimitPerIndex"] == 2
    return job


def test_indexed_job_workers_publish_one_backup_only_when_every_shard_is_durable(
    applied_job: dict, s3_store_url: str, minio_env: dict[str, str], cli: Cli, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt" / "step-100"
    ckpt.mkdir(parents=True)
    for i in range(6):  # each worker's share spans several packs, so one can land before the worker is killed
        (ckpt / f"model-{i:05d}-of-00006.bin").write_bytes(os.urandom(SHARD_MIB * MIB))
    (ckpt / "COMPLETE").write_bytes(b"")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"store": s3_store_url, "sources": {"checkpoints": {"path": str(tmp_path / "ckpt")}}})
    )
    cli.env |= minio_env
    cli("init", "--store", s3_store_url, "--no-save", check=True)
    argv, job_env = worker_command(applied_job)
    job_env |= {
        "DRTOOL_CONFIG": str(config),
        "DRTOOL_PASSPHRASE_FILE": "",
        "AWS_ENDPOINT_URL": minio_env["AWS_ENDPOINT_URL"],
    }
    job_env["HOME"] = str(cli.home)
    job_env.pop("AWS_SHARED_CREDENTIALS_FILE")
    repo = Repository.open(open_backend(s3_store_url), Credentials(passphrase=PASSPHRASE))

    def start(index: int) -> subprocess.Popen[str]:
        env = cli.env | job_env | {"JOB_COMPLETION_INDEX": str(index)}
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # worker 1 is killed once its first pack is in the store
    victim = start(1)
    deadline = time.monotonic() + 120
    while not list(repo.backend.list(layout.PACKS)) and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert victim.poll() is None, "worker 1 finished before the test could kill it"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    landed = set(repo.backend.list(layout.PACKS))
    assert landed, "the worker died before uploading a pack: the test would not show reuse"
    others = [start(0), start(2)]
    outputs = [json.loads(p.communicate(timeout=300)[0]) for p in others]
    assert not any(o["published"] for o in outputs)
    assert repo.backup_ids() == []  # two of three shards durable: nothing visible
    assert json.loads(cli("--store", s3_store_url, "list", "--json", check=True).stdout) == []

    rerun = start(1)  # backoffLimitPerIndex: the Job controller starts index 1 again, same env
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    result = json.loads(out)
    assert result["published"] and result["status"] == "complete"
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
