"""An etcd backup is a whole Kubernetes cluster: restore it into a NEW etcd, start a NEW kube-apiserver on it.

The source is the seeded lab (CRDs, custom resources, Secrets encrypted at rest, owner chains, status).
The etcd plugin backs its etcd up into the real store and restores the snapshot into a new member; a new
API server with a new serving certificate, on a new port, but with the two things escrowed from the
source (the service-account signing key and the EncryptionConfiguration), must then serve every object
exactly as the source did. Then the Kubernetes-specific steps after an etcd restore (docs/etcd.md) are
exercised: the stale ``default/kubernetes`` Service and Endpoints, and what happens without the escrow.
"""

from __future__ import annotations

import base64
import dataclasses
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.etcd_seed import gateway, settings_of
from drtool_lab.kube_seed import secret_value
from drtool_lab.lab import Lab
from drtool_plugins.etcd import EtcdPlugin
from kubernetes import client
from kubernetes.client.rest import ApiException

from drtool.backends.local import LocalBackend
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import RestoreOutcome, run_restore
from drtool.servers import process
from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab, wait_for

plugin = EtcdPlugin()
SA_NAMESPACE, SA_NAME = "team-nlp", "trainer"


@dataclasses.dataclass
class Rebuilt:
    """The source's state at backup time, and the cluster rebuilt from its etcd snapshot."""

    before: dict[str, dict[tuple[str, str], dict[str, Any]]]
    token: str  # minted by the source for team-nlp/trainer, before the backup
    manifest: Manifest
    outcome: RestoreOutcome
    etcd: EtcdServer
    kube: KubeLab


def mint_token(kube: KubeLab) -> str:
    """A bound service-account token, issued (signed) by the source API server."""
    request = {"spec": {"expirationSeconds": 3600}}
    core = client.CoreV1Api(kube.api_client())
    return core.create_namespaced_service_account_token(SA_NAME, SA_NAMESPACE, request).status.token


def whoami(server: KubeApiserver, token: str) -> requests.Response:
    """SelfSubjectReview with a bearer token: 201 names the token's user, 401 means it was not accepted."""
    with requests.Session() as session:
        session.trust_env = False
        return session.post(
            f"{server.url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            headers={"Authorization": f"Bearer {token}"},
            verify=server.access().ca,
            timeout=10,
        )


@pytest.fixture(scope="module")
def rebuilt(kube_source: KubeLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rebuilt]:
    work = tmp_path_factory.mktemp("whole-cluster")
    token = mint_token(kube_source)
    before = kube_source.list_objects()
    repo = Repository.init(LocalBackend(work / "store"), passphrase=PASSPHRASE)
    with BackupSession(repo) as session:
        assert session.run_plugin(plugin, settings_of(kube_source.etcd)).status == "ok"
        manifest = session.commit()
    target = {"data_dir": str(work / "etcd-data"), "name": "rebuilt-0", "start": True, "lab_dir": str(work / "lab")}
    outcome = run_restore(repo, manifest, plugin, target)
    etcd = EtcdServer.from_state(dict(outcome.result.details["server"]))
    assert isinstance(etcd, EtcdServer)
    lab = Lab("kube-rebuilt", root=work / "labs")
    lab.components["etcd"] = etcd  # so the lab's env() and down() cover it too
    source = kube_source.apiserver
    server = lab.add(
        "kube-apiserver",
        etcd_servers=etcd.client_url,
        service_account_key=str(source.service_account_keys.key),  # the escrow
        encryption_config=str(source.encryption_config_path),
    )
    assert isinstance(server, KubeApiserver)
    try:
        lab.start(server)
        yield Rebuilt(before, token, manifest, outcome, etcd, KubeLab(lab, etcd, server, kube_source.seeded))
    finally:
        lab.down()
        shutil.rmtree(work, ignore_errors=True)


def test_the_etcd_restore_itself_verified(rebuilt: Rebuilt) -> None:
    assert rebuilt.outcome.verified, [c for c in rebuilt.outcome.checks if not c.ok]
    assert rebuilt.outcome.result.details["restored_revision"] == rebuilt.manifest.plugins["etcd"].meta["revision"]


def test_every_seeded_object_is_served_again_unchanged(rebuilt: Rebuilt, kube_source: KubeLab) -> None:
    after = rebuilt.kube.list_objects()
    assert rebuilt.kube.seeded is not None
    for kind, count in rebuilt.kube.seeded.counts.items():
        assert after[kind].keys() == rebuilt.before[kind].keys(), kind
        seeded = [(ns, name) for k, ns, name in rebuilt.kube.seeded.refs if k == kind]
        assert len(seeded) == count
        for key in seeded:  # same UID, same spec and status, same managedFields: the very same objects
            assert after[kind][key] == rebuilt.before[kind][key], (kind, key)


def test_secrets_decrypt_with_the_escrowed_encryption_config(rebuilt: Rebuilt) -> None:
    core = client.CoreV1Api(rebuilt.kube.api_client())
    secret = core.read_namespaced_secret("s3-credentials", "team-nlp")
    value = base64.b64decode(secret.data["AWS_SECRET_ACCESS_KEY"]).decode()
    assert value == secret_value("team-nlp", "s3-credentials", "AWS_SECRET_ACCESS_KEY")
    # ...and in the restored etcd it is ciphertext: the snapshot alone does not give Secrets away
    key = base64.b64encode(b"/registry/secrets/team-nlp/s3-credentials").decode()
    (kv,) = gateway(settings_of(rebuilt.etcd), "/v3/kv/range", {"key": key})["kvs"]
    raw = base64.b64decode(kv["value"])
    assert raw.startswith(b"k8s:enc:secretbox:v1:") and value.encode() not in raw


def test_tokens_issued_before_the_disaster_still_authenticate(rebuilt: Rebuilt) -> None:
    resp = whoami(rebuilt.kube.apiserver, rebuilt.token)
    assert resp.status_code == 201, resp.text
    assert resp.json()["status"]["userInfo"]["username"] == f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"


def test_stale_kubernetes_service_is_rebuilt_for_the_new_api_server(rebuilt: Rebuilt, kube_source: KubeLab) -> None:
    """The snapshot still points `default/kubernetes` at the OLD server; deleting it lets the new one recreate it."""
    core = client.CoreV1Api(rebuilt.kube.api_client())
    old, new = kube_source.apiserver.secure_port, rebuilt.kube.apiserver.secure_port

    def ports() -> tuple[Any, Any]:
        try:
            service = core.read_namespaced_service("kubernetes", "default").spec.ports[0].target_port
            endpoints = core.read_namespaced_endpoints("kubernetes", "default").subsets[0].ports[0].port
        except (ApiException, TypeError, IndexError):
            return None, None
        return service, endpoints

    assert old in ports()  # stale: clients inside the cluster would still be sent to the old server
    core.delete_namespaced_service("kubernetes", "default")
    core.delete_namespaced_endpoints("kubernetes", "default")
    deadline = time.monotonic() + 60
    while ports() != (new, new) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ports() == (new, new)
    service = core.read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip == "10.96.0.1"  # the first address of the (same) service CIDR


def test_without_the_escrow_the_rebuilt_cluster_is_not_the_same(rebuilt: Rebuilt) -> None:
    lab = rebuilt.kube.lab
    etcd = rebuilt.etcd.client_url
    # a new signing key (but the right encryption config): the old tokens are now rejected
    fresh_key = lab.add("kube-apiserver", name="fresh-sa-key", etcd_servers=etcd)
    assert isinstance(fresh_key, KubeApiserver)
    fresh_key.encryption_config = str(rebuilt.kube.apiserver.encryption_config_path)
    lab.start(fresh_key)
    assert whoami(fresh_key, rebuilt.token).status_code == 401
    fresh_key.stop()
    # a new encryption key: the server cannot decrypt the Secrets it must cache, and never becomes ready
    fresh_enc = lab.add("kube-apiserver", name="fresh-encryption", etcd_servers=etcd)
    assert isinstance(fresh_enc, KubeApiserver)
    fresh_enc.path.mkdir(parents=True, exist_ok=True)
    fresh_enc.ensure_pki()
    fresh_enc.pid = process.spawn(fresh_enc.argv(), fresh_enc.log_path)  # started as start() does, not awaited
    try:  # under load it gets to its caches late: wait for the failure itself, not a fixed 15 s
        wait_for(lambda: "failed to decrypt data" in fresh_enc.log_path.read_text(), "the decryption failure", 180)
        time.sleep(5)  # it is ready in about 3 s when it can decrypt
        assert fresh_enc.running() and not fresh_enc.healthy()
    finally:
        fresh_enc.stop()
