"""Hostile backup content: a backup forged by someone who holds the key, then restored (docs/threat-model.md).

Every forged backup here is written the way an attacker with the key would write it: through the real
``BackupSession`` with the real key, under the real plugin's name, carrying a hostile name where the plugin
expects one (a checkpoint key, a git repository, a DNS zone, an archive member, a chart, an image
repository, a model file, a Vault KV path, a Kubernetes object). Each restore must refuse with a one-line
``IntegrityError`` naming that path, before anything is written, and nothing may appear outside the root
it restores into. Real servers where the plugin talks to one (registry, MLflow + MinIO, OpenBao,
kube-apiserver); the attacker's own pieces (a tar, a bundle, a zone) are built here.
"""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import hvac
import pytest

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.errors import DrtoolError, IntegrityError
from drtool.kube.discovery import ResourceType
from drtool.plugin.manager import get_plugin
from drtool.plugin.toolkit.oci.registry import OCI_MANIFEST, Registry, sha256_digest
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.kube import KubeLab
from tests.fixtures.mlflow import start_mlflow_lab
from tests.fixtures.registry import RegistryLab

Artifacts = Mapping[str, tuple[bytes, Mapping[str, Any]]]


class Forger:
    """Writes the artifacts and facts it is given under another plugin's name: the attacker holding the key."""

    def __init__(self, name: str, artifacts: Artifacts, meta: Mapping[str, Any] | None = None) -> None:
        self.name, self.artifacts, self.meta = name, artifacts, dict(meta or {})

    def backup(self, source: Mapping[str, Any], ctx: Any) -> Mapping[str, Any]:
        for artifact, (data, meta) in self.artifacts.items():
            with ctx.artifact(artifact, meta=meta) as sink:
                sink.write(data)
        return self.meta


def forge(repo: Repository, plugin: str, artifacts: Artifacts, meta: Mapping[str, Any] | None = None) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(Forger(plugin, artifacts, meta), {})
        assert outcome.status == "ok", outcome.error
        return session.commit()


def refused(repo: Repository, manifest: Manifest, plugin: str, target: Mapping[str, Any], name: str) -> str:
    """Restore and expect the one-line refusal that names ``name``; returns the message."""
    with pytest.raises(IntegrityError) as err:
        run_restore(repo, manifest, get_plugin(plugin), target)
    line = err.value.one_line()
    assert name in line and "\n" not in line, line
    assert err.value.exit_code == 4
    return line


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def tar_bytes(*members: tuple[str, bytes | None, dict[str, Any]]) -> bytes:
    """A tar of (name, content or None, TarInfo attributes) members, as the attacker builds it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, attrs in members:
            info = tarfile.TarInfo(name)
            for key, value in attrs.items():
                setattr(info, key, value)
            info.size = len(data or b"")
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


# --- files: archive members ------------------------------------------------------------------------------

FILE = {"type": tarfile.REGTYPE, "mode": 0o644}
LINKS = {
    "a symbolic link": ("link", {"type": tarfile.SYMTYPE, "linkname": "sub"}),
    "a hard link": ("hard", {"type": tarfile.LNKTYPE, "linkname": "0-pki/ca.crt"}),
    "a FIFO": ("fifo", {"type": tarfile.FIFOTYPE}),
    "a character device": ("null", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}),
}


def test_files_member_with_dot_dot_is_refused_and_nothing_lands_outside(repo: Repository, tmp_path: Path) -> None:
    archive = tar_bytes(("0-pki/ca.crt", b"ca", FILE), ("0-pki/../../escaped.txt", b"owned", FILE))
    manifest = forge(repo, "files", {"files.tar": (archive, {"roots": ["/etc/kubernetes/pki"]})})
    root = tmp_path / "restore" / "pki"
    refused(repo, manifest, "files", {"path": str(root)}, "0-pki/../../escaped.txt")
    assert not (tmp_path / "restore" / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()
    assert files_under(tmp_path / "restore") == []  # no staging folder left either


@pytest.mark.parametrize("kind", sorted(LINKS))
def test_files_links_devices_and_fifos_are_refused_whatever_the_python(
    repo: Repository, tmp_path: Path, kind: str
) -> None:
    name, attrs = LINKS[kind]
    archive = tar_bytes(("0-pki/ca.crt", b"ca", FILE), (f"0-pki/{name}", None, attrs))
    manifest = forge(repo, "files", {"files.tar": (archive, {})})
    root = tmp_path / "restore"
    line = refused(repo, manifest, "files", {"path": str(root)}, f"0-pki/{name}")
    assert kind in line
    assert files_under(tmp_path / "restore") == [] and not root.exists()


def test_files_refusal_is_one_line_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    repo = Repository.open(open_backend(str(store)), Credentials(passphrase=PASSPHRASE))
    archive = tar_bytes(("0-pki/../../escaped.txt", b"owned", FILE))
    manifest = forge(repo, "files", {"files.tar": (archive, {})})
    dest = tmp_path / "out" / "pki"
    proc = cli("--store", str(store), "restore", manifest.id, "-p", "files", "-t", f"path={dest}")
    assert_clean_error(proc, 4, "0-pki/../../escaped.txt", "forged or damaged")
    assert files_under(tmp_path / "out") == []


# --- checkpoints: object keys ----------------------------------------------------------------------------


def test_checkpoint_key_with_dot_dot_is_refused(repo: Repository, tmp_path: Path) -> None:
    shard = b"\0" * 64
    meta = {"source": "runs", "url": "/data/ckpt", "checkpoint": "step-10", "kind": "marker"}
    manifest = forge(
        repo,
        "checkpoints",
        {
            "runs/0": (shard, meta | {"key": "step-10/shard-0.bin", "commit": -1}),
            "runs/1": (shard, meta | {"key": "step-10/../../../escaped.bin", "commit": -1}),
            "runs/2": (b"done", meta | {"key": "step-10/COMPLETE", "commit": 0}),
        },
    )
    root = tmp_path / "a" / "ckpt"
    refused(repo, manifest, "checkpoints", {"path": str(root)}, "step-10/../../../escaped.bin")
    assert not (tmp_path / "escaped.bin").exists() and files_under(tmp_path / "a") == []


# --- git: repository names -------------------------------------------------------------------------------


def bundle(tmp_path: Path) -> tuple[bytes, str]:
    """A real one-commit bundle (the attacker's own repository) and its commit id."""
    work = tmp_path / "attacker"
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@example.com", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True).stdout

    work.mkdir()
    git("init", "-q", "-b", "main")
    (work / "README").write_text("hello\n")
    git("add", "README")
    git("commit", "-q", "-m", "first")
    git("bundle", "create", "-q", str(tmp_path / "r.bundle"), "--all")
    return (tmp_path / "r.bundle").read_bytes(), git("rev-parse", "HEAD").strip()


def test_git_repository_name_with_dot_dot_is_refused(repo: Repository, tmp_path: Path) -> None:
    data, commit = bundle(tmp_path)
    repo_meta = {"artifact": "r.bundle", "head": "main", "branches": {"main": {"commit": commit}}, "tags": {}}
    meta = {"repos": {"../../escaped": repo_meta, "fleet": repo_meta}}
    manifest = forge(repo, "git", {"r.bundle": (data, {"format": "git-bundle-v2"})}, meta)
    root = tmp_path / "srv" / "git"
    refused(repo, manifest, "git", {"path": str(root / "{name}.git")}, "../../escaped")
    assert not (tmp_path / "escaped.git").exists() and files_under(tmp_path / "srv") == []


# --- dns-certs: zone names -------------------------------------------------------------------------------


def zone_artifact(zone: str) -> tuple[bytes, dict[str, Any]]:
    soa = f"{zone} 300 IN SOA ns1.example. hostmaster.example. 2026112901 3600 600 86400 300\n"
    ns = f"{zone} 300 IN NS ns1.example.\n"
    return (soa + ns).encode(), {"format": "dns-zone-v1", "zone": zone, "server": "198.51.100.53:53"}


@pytest.mark.parametrize("how", ["dot-dot", "absolute"])
def test_dns_zone_name_that_leaves_zone_dir_is_refused(repo: Repository, tmp_path: Path, how: str) -> None:
    escaped = Path("/tmp") / f"drtool-hostile-{secrets.token_hex(4)}"
    zone = "x/../../escaped." if how == "dot-dot" else f"{escaped}."
    manifest = forge(repo, "dns-certs", {"zones/evil.zone": zone_artifact(zone)})
    root = tmp_path / "t" / "zones"
    refused(repo, manifest, "dns-certs", {"kubernetes": False, "zone_dir": str(root)}, zone.rstrip("."))
    assert not Path(f"{escaped}.zone").exists() and not (tmp_path / "escaped.zone").exists()
    assert files_under(tmp_path / "t") == []


# --- helm and images: names that become registry API paths ------------------------------------------------


def test_helm_chart_name_cannot_leave_the_chart_prefix(repo: Repository, registry_target: RegistryLab) -> None:
    tgz = b"\x1f\x8b\x08\x00" + b"not really a chart" * 4
    chart = {
        "name": "x/../../escaped",
        "version": "1.0.0",
        "artifact": "charts/repo/evil-1.0.0.tgz",
        "digest": sha256_digest(tgz),
        "size": len(tgz),
        "metadata": {"name": "x/../../escaped", "version": "1.0.0", "apiVersion": "v2"},
    }
    index = {"format": "drtool-helm-v1", "repositories": [{"url": "http://charts.example", "charts": [chart]}]}
    index["oci_charts"] = []
    manifest = forge(
        repo,
        "helm",
        {"charts.json": (json.dumps(index).encode(), {"format": "drtool-helm-v1"}), chart["artifact"]: (tgz, {})},
    )
    target = {"registry": registry_target.host, "chart_prefix": "charts"}
    refused(repo, manifest, "helm", target, "charts/x/../../escaped")
    reg = registry_target.client()
    assert reg.manifest_digest("escaped", "1.0.0") is None and not reg.has_blob("escaped", chart["digest"])


def test_image_repository_with_dot_dot_is_refused(repo: Repository, registry_target: RegistryLab) -> None:
    config, layer = b"{}", b"layer bytes"
    image_manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256_digest(config), "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": sha256_digest(layer), "size": len(layer)}],
    }
    raw = json.dumps(image_manifest).encode()
    digest = sha256_digest(raw)
    image = {
        "ref": "src.example/team/app:1",
        "host": "src.example",
        "repository": "team/../../escaped",
        "digest": digest,
        "media_type": OCI_MANIFEST,
        "tags": {"1": digest},
        "manifests": [[digest, OCI_MANIFEST]],
        "blobs": [sha256_digest(config), sha256_digest(layer)],
    }
    artifacts: dict[str, tuple[bytes, Mapping[str, Any]]] = {
        "images.json": (json.dumps({"format": "drtool-images-v1", "images": [image]}).encode(), {}),
        "manifests/" + digest.replace(":", "/"): (raw, {}),
    }
    artifacts |= {"blobs/" + sha256_digest(b).replace(":", "/"): (b, {}) for b in (config, layer)}
    manifest = forge(repo, "images", artifacts)
    refused(repo, manifest, "images", {"registry": registry_target.host}, "team/../../escaped")
    reg = Registry(registry_target.host)
    assert not any(reg.has_blob("escaped", d) for d in image["blobs"])  # type: ignore[union-attr]


# --- model-registry: version and file names that become S3 keys -----------------------------------------


@pytest.fixture(scope="module")
def mlflow_target(lab_root: Path) -> Iterator[Any]:
    target = start_mlflow_lab(lab_root, "mlflow-hostile", seed=False)
    try:
        yield target
    finally:
        target.lab.down()


def registry_document(path: str, version: str, data: bytes) -> dict[str, Any]:
    files = [{"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    mv = {
        "version": version,
        "resolved": "s3://mlflow/artifacts/1/abc/artifacts/model",
        "artifact": "files/0.tar",
        "files": files,
        "run_id": "",
        "run_link": "",
        "stage": "None",
        "status": "READY",
        "description": "",
        "tags": {},
    }
    model = {"name": "forged-model", "description": "", "tags": {}, "aliases": {}, "versions": [mv]}
    return {"format": 1, "server": "http://mlflow.example", "models": [model], "runs": {}, "skipped": []}


@pytest.mark.parametrize(
    ("path", "version", "named"),
    [("../../../escaped.txt", "1", "../../../escaped.txt"), ("model.pkl", "1/../..", "1/../..")],
    ids=["file", "version"],
)
def test_model_registry_names_cannot_leave_the_artifacts_prefix(
    repo: Repository, mlflow_target: Any, path: str, version: str, named: str
) -> None:
    data = b"weights"
    files = tar_bytes((path, data, FILE))
    document = registry_document(path, version, data)
    manifest = forge(
        repo,
        "model-registry",
        {"files/0.tar": (files, {}), "registry.json": (json.dumps(document).encode(), {"format": 1})},
    )
    refused(repo, manifest, "model-registry", mlflow_target.settings, named)
    s3 = mlflow_target.minio.client()
    listed = s3.list_objects_v2(Bucket=mlflow_target.server.bucket).get("Contents") or []
    assert [o["Key"] for o in listed if "escaped" in o["Key"] or "forged" in o["Key"]] == []
    assert mlflow_target.client().search_registered_models(filter_string="name = 'forged-model'") == []


# --- vault: KV paths that become API paths ---------------------------------------------------------------


def kv_export(mount: str, path: str) -> bytes:
    header = {"mount": mount, "options": {"version": "2"}, "description": "", "config": {}}
    secret = {
        "path": path,
        "metadata": {"current_version": 1},
        "versions": [{"version": 1, "data": {"planted": "yes"}, "deletion_time": "", "destroyed": False}],
    }
    return (json.dumps(header) + "\n" + json.dumps(secret) + "\n").encode()


def test_vault_kv_path_cannot_reach_another_mount(repo: Repository, openbao_kv_target: tuple[Any, str]) -> None:
    server, token_env = openbao_kv_target
    other = f"hostile-{secrets.token_hex(3)}"
    client = hvac.Client(url=server.address, token=server.root_token)
    client.sys.enable_secrets_engine("kv", path=other, options={"version": "2"})
    mount = f"restored-{secrets.token_hex(3)}"
    path = f"../../{other}/data/escaped"
    manifest = forge(repo, "vault", {f"kv/{mount}.ndjson": (kv_export(mount, path), {"mount": mount})})
    target = {"address": server.address, "token_env": token_env}
    refused(repo, manifest, "vault", target, path)
    with pytest.raises(hvac.exceptions.InvalidPath):
        client.secrets.kv.v2.read_secret_version(path="escaped", mount_point=other, raise_on_deleted_version=True)
    assert f"{mount}/" not in client.sys.list_mounted_secrets_engines()["data"]


# --- kubernetes, kueue, dns-certs: object names that become API paths -------------------------------------

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, ("create", "get", "list", "patch"))
HOSTILE_NAME = "x/../../../../namespaces/kube-system/configmaps/escaped"


def configmap(namespace: str, name: str) -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace, "name": name}}
    return {"object": obj | {"data": {"planted": "yes"}}, "uid": secrets.token_hex(8)}


def test_kubernetes_object_names_are_checked_before_anything_is_applied(repo: Repository, kube_target: KubeLab) -> None:
    records = [configmap("default", "first"), configmap("default", HOSTILE_NAME)]
    body = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    target = {"kubeconfig": kube_target.kubeconfig}
    from kubernetes import client as k8s

    for plugin in ("kubernetes", "kueue", "dns-certs"):
        manifest = forge(repo, plugin, {CONFIGMAPS.artifact: (body, CONFIGMAPS.meta())})
        refused(repo, manifest, plugin, target, HOSTILE_NAME)
        with kube_target.api_client() as api:
            listed = [k8s.CoreV1Api(api).list_namespaced_config_map(ns).items for ns in ("default", "kube-system")]
        names = {c.metadata.name for items in listed for c in items}
        assert not {"first", "escaped"} & names, (plugin, names)


def test_no_error_is_a_traceback(repo: Repository, tmp_path: Path) -> None:
    """A name that is not even a string is refused like any other (a forged manifest can hold any JSON)."""
    manifest = forge(repo, "checkpoints", {"runs/0": (b"x", {"source": 7, "key": None, "checkpoint": "c"})})
    with pytest.raises(DrtoolError):
        run_restore(repo, manifest, get_plugin("checkpoints"), {"path": str(tmp_path / "c")})


# --- what drtool starts never inherits its secrets ---------------------------------------------------------

SECRETS = {"DRTOOL_PASSPHRASE": "pass-0b7e", "AWS_SECRET_ACCESS_KEY": "aws-91cd", "VAULT_TOKEN": "tok-5a2f"}
CALLS = {"run", "Popen", "call", "check_call", "check_output"}


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_a_lab_server_gets_neither_the_passphrase_nor_cloud_keys(
    lab_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drtool_lab.lab import Lab

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    lab = Lab("env-scrub", root=lab_root)
    lab.add("etcd")
    try:
        lab.up(["etcd"])
        seen = environ_of(lab["etcd"].pid or 0)
    finally:
        lab.down()
    assert not set(SECRETS) & set(seen) and "PATH" in seen, sorted(seen)


def test_git_runs_with_drtools_secrets_scrubbed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from drtool_plugins.git.gitcmd import git

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    seen = git("-c", "alias.show-env=!env", "show-env", cwd=tmp_path)
    assert not any(value in seen for value in SECRETS.values())
    assert "GIT_ALLOW_PROTOCOL=file:git:http:https:ssh" in seen and "GIT_TERMINAL_PROMPT=0" in seen


def test_every_subprocess_call_site_passes_a_scrubbed_environment() -> None:
    """Each ``subprocess`` call in drtool and its plugins names ``env=`` (drtool.environ.child_env, or the lab's
    ``process.spawn``, which uses it): a new call site that forgets it fails here."""
    import ast

    root = Path(__file__).resolve().parents[2]
    missing = []
    for path in [*(root / "drtool").rglob("*.py"), *(root / "plugins").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and func.attr in CALLS
                and isinstance(func.value, ast.Name)
                and func.value.id == "subprocess"
                and not any(k.arg == "env" for k in node.keywords)  # type: ignore[union-attr]
            ):
                missing.append(f"{path.relative_to(root)}:{node.lineno}")
    assert missing == []
