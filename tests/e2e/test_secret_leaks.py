"""No secret leaks: distinctive values seeded into every source, then every command run at DEBUG, and a search.

Seeded: a Kubernetes Secret (through the lab API server), a plain etcd value (in that cluster's etcd), a TLS
private key and a token file (files plugin), a KV secret plus the root token and unseal keys of a real
OpenBao (vault plugin), a registered-model tag holding a token (MLflow, model-registry plugin). The store
passphrase and the S3 secret key are searched for too. Each value is searched raw and base64-encoded (how
Kubernetes and etcd's JSON gateway carry bytes) in: every command's stdout and stderr, the catalog
database, every file left in TMPDIR, every object in the store — and in ``/proc/<pid>/cmdline`` of the
drtool backup process and its children, sampled while a long-ish backup runs.
"""

from __future__ import annotations

import base64
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import hvac
import pytest
import yaml
from drtool_lab.components.minio import MinioServer
from drtool_lab.etcd_seed import gateway, settings_of
from drtool_lab.lab import Lab
from drtool_plugins.vault.kv import wait_ready

from drtool.servers.openbao import OpenBaoServer
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab
from tests.fixtures.mlflow import MlflowLab, start_mlflow_lab
from tests.fixtures.noise import noise

MIB = 1024 * 1024


def _needles(values: Mapping[str, str]) -> dict[str, bytes]:
    """Each secret raw and base64-encoded: what must never be found in plaintext."""
    out: dict[str, bytes] = {}
    for name, value in values.items():
        raw = value.encode()
        out[name] = raw
        out[f"{name} (base64)"] = base64.b64encode(raw)
    return out


def _found(data: bytes, needles: Mapping[str, bytes]) -> list[str]:
    return [name for name, needle in needles.items() if needle in data]


@pytest.fixture
def bao(lab_root: Path) -> Iterator[OpenBaoServer]:
    """An OpenBao of this test's own (the session's seeded one is read-only for tests)."""
    lab = Lab("bao-secret-leaks", root=lab_root)
    lab.up([OpenBaoServer.kind])
    server = lab.first(OpenBaoServer.kind)
    assert isinstance(server, OpenBaoServer)
    yield server
    lab.down()


@pytest.fixture
def mlflow_empty(lab_root: Path) -> Iterator[MlflowLab]:
    lab = start_mlflow_lab(lab_root, "mlflow-secret-leaks", seed=False)
    yield lab
    lab.lab.down()


class CmdlineSampler:
    """Reads ``/proc/<pid>/cmdline`` of a process and all its descendants, every few milliseconds."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, set[bytes]] = {}  # pid -> every distinct argv it showed
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CmdlineSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _tree(self) -> set[int]:
        """The root and its descendants, read down from the root through each thread's ``children`` list: a
        few small files every round, where reading every process's ``stat`` (a busy machine has hundreds)
        kept a core busy for the whole sampled backup."""
        tree, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            for children in Path(f"/proc/{pid}/task").glob("*/children"):
                try:
                    todo += [int(c) for c in children.read_text().split() if int(c) not in tree]
                except OSError:  # the thread or the process ended meanwhile
                    continue
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._tree():
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if cmdline:
                    self.seen.setdefault(pid, set()).add(cmdline)
            self.samples += 1
            time.sleep(0.01)


def test_no_seeded_secret_leaks_anywhere(
    cli: Cli,
    tmp_path: Path,
    kube_target: KubeLab,
    bao: OpenBaoServer,
    mlflow_empty: MlflowLab,
    minio: MinioServer,
    s3_store_url: str,
    minio_env: dict[str, str],
) -> None:
    tag = secrets.token_hex(10)
    values = {
        "kubernetes Secret": f"k8s-db-password-{tag}",
        "etcd value": f"etcd-api-token-{tag}",
        "TLS private key": f"tls-key-material-{tag}",
        "token file": f"service-account-token-{tag}",
        "vault KV secret": f"vault-kv-secret-{tag}",
        "vault root token": bao.root_token,
        "MLflow tag token": f"hf-token-{tag}",
        "passphrase": PASSPHRASE,
        "S3 secret key": minio_env["AWS_SECRET_ACCESS_KEY"],
    }
    unseal = yaml.safe_load(Path(bao.init_file).read_text())
    for i, key in enumerate(unseal.get("unseal_keys_b64") or unseal.get("keys_base64") or []):
        values[f"vault unseal key {i}"] = key
    assert "vault unseal key 0" in values, "the escrow file's layout changed: the unseal keys would go unsearched"
    needles = _needles(values)

    # -- seed every source -------------------------------------------------------------------------------
    from kubernetes import client as k8s

    with kube_target.api_client() as api:
        core = k8s.CoreV1Api(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="ml-serving")))
        secret = k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name="db", namespace="ml-serving"),
            string_data={"password": values["kubernetes Secret"]},
        )
        core.create_namespaced_secret("ml-serving", secret)
    etcd = settings_of(kube_target.etcd)
    gateway(
        etcd,
        "/v3/kv/put",
        {
            "key": base64.b64encode(b"/apps/api-token").decode(),
            "value": base64.b64encode(values["etcd value"].encode()).decode(),
        },
    )
    pki = tmp_path / "pki"
    pki.mkdir()
    (pki / "tls.key").write_text(
        f"-----BEGIN PRIVATE KEY-----\n{values['TLS private key']}\n-----END PRIVATE KEY-----\n"
    )
    (pki / "token").write_text(values["token file"])
    (pki / "weights.bin").write_bytes(noise(48 * MIB))  # makes the backup last long enough to sample
    vault = hvac.Client(url=bao.address, token=bao.root_token)
    vault.sys.enable_secrets_engine("kv", path="secret", options={"version": "2"})
    wait_ready(vault, "secret")  # a new KV v2 mount takes writes only once it has upgraded itself
    vault.secrets.kv.v2.create_or_update_secret(
        "ml/db", secret={"password": values["vault KV secret"]}, mount_point="secret"
    )
    token_file = tmp_path / "bao-token"
    token_file.write_text(bao.root_token)
    token_file.chmod(0o600)
    mlflow = mlflow_empty.client()
    mlflow.create_registered_model("fraud-detector", tags={"hf_token": values["MLflow tag token"]})

    sources = {
        "kubernetes": {"kubeconfig": kube_target.readonly_kubeconfig},
        "etcd": etcd,
        "files": {"paths": [str(pki)]},
        "vault": {"address": bao.address, "token_file": str(token_file), "unseal_keys_file": str(bao.init_file)},
        "model-registry": {"url": mlflow_empty.server.url},
    }
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": sources}))
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    cli.env.update(minio_env)
    cli.env.update({"TMPDIR": str(tmpdir), "DRTOOL_LOG_LEVEL": "DEBUG"})
    restored = tmp_path / "restored"

    outputs: list[tuple[str, bytes]] = []

    def run(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        proc = cli(*args)
        assert proc.returncode in ok, (args, proc.returncode, proc.stderr[-3000:])
        outputs.append((f"drtool {args[0]} stdout", proc.stdout.encode()))
        outputs.append((f"drtool {args[0]} stderr", proc.stderr.encode()))
        return proc

    run("init", "--store", s3_store_url)
    # -- a long-ish backup, its process tree sampled -------------------------------------------------------
    proc = cli.popen("backup", "-p", "kubernetes", "-p", "etcd", "-p", "files", "-p", "vault", "-p", "model-registry")
    with CmdlineSampler(proc.pid) as sampler:
        stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert "DEBUG drtool.backup" in stderr  # the logging really was at DEBUG
    outputs += [("drtool backup stdout", stdout.encode()), ("drtool backup stderr", stderr.encode())]
    assert sampler.samples >= 5 and sampler.seen, (sampler.samples, sampler.seen)
    for pid, cmdlines in sampler.seen.items():
        for cmdline in cmdlines:
            assert not _found(cmdline, needles), (pid, cmdline[:300], _found(cmdline, needles))
    print(f"\ncmdline: {sampler.samples} samples of {len(sampler.seen)} process(es) during the backup")

    run("list")
    run("show", "latest")
    run("show", "latest", "--json")
    run("check", "--read-data")
    run("restore", "latest", "-p", "files", "-t", f"path={restored}")
    run("restore", "latest", "-p", "kubernetes", "--dry-run", "-t", f"kubeconfig={kube_target.kubeconfig}")
    # the restore really brought the secret back, to its target: the one place it may be
    # (and the search finds a needle where one is: a control that the scan below can fail)
    assert [_found(p.read_bytes(), needles) for p in restored.rglob("tls.key")] == [["TLS private key"]]

    # -- search everything drtool wrote or printed ----------------------------------------------------------
    for name, data in outputs:
        assert not _found(data, needles), (name, _found(data, needles))
    catalog = Path(cli.env["DRTOOL_CATALOG"])
    assert catalog.stat().st_size > 0
    assert not _found(catalog.read_bytes(), needles), "catalog database"
    for leftover in (p for p in tmpdir.rglob("*") if p.is_file()):
        assert not _found(leftover.read_bytes(), needles), leftover
    s3 = minio.client()
    bucket = s3_store_url.removeprefix("s3://").split("/", 1)[0]
    objects = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", ()):
            data = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            assert not _found(data, needles), (obj["Key"], _found(data, needles))
            objects += 1
    assert objects >= 5  # config, key slot, key record, manifest, and the chunks' packs (or loose chunks)
    print(f"searched {len(needles)} needles in {len(outputs)} outputs, the catalog, TMPDIR and {objects} store objects")
