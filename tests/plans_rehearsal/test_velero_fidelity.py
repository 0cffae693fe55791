"""The two tools' restores of the same objects, side by side: what each restores equal, differently, or not at all.

One living lab (Job controller, scheduler, kwok's nodes, Kueue) with MinIO and Velero. Namespace ``src`` holds
what tests/plugins/test_kubernetes_holds.py seeds (a Job that completed, a Job waiting for a node pool, a Kueue
Job admitted, a TrainJob) plus an owner chain with real UIDs (ConfigMap -> Secret), an object made with
``generateName``, and a custom resource of a CRD with two served versions whose status was written through its
/status subresource. drtool backs ``src`` up and restores it into ``dst`` (its namespace transform); Velero
backs it up (``velero backup create --include-namespaces src``) and restores it into ``velero-dst``
(``--namespace-mappings src:velero-dst``). Each finding cites Velero v1.18.3's code (docs/peers.md).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.components.velero import BUCKET, PREFIX, VeleroServer
from drtool_lab.kube_seed import KubeClient as SeedClient
from drtool_lab.kube_seed import install_crds, wait_established
from kubernetes import client

from drtool.kube.holds import COMPLETED
from drtool.kube.readings import is_true
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, lab_name, start_kube_lab, wait_for
from tests.plans_rehearsal.test_independence import crd
from tests.plugins.test_kubernetes_holds import KINDS, TRANSFORMS, _seed, _suspended_seen

plugin = get_plugin("kubernetes")
GROUP, PLURAL = "fidelity.drtool.dev", "gadgets"
SECRET_VALUE = "fidelity-secret-value-7f3a"
VELERO_NS = "velero-dst"
Obj = dict[str, Any]


def _crd() -> Obj:
    """Two served versions, v1 stored, both with a /status subresource."""
    two = crd(GROUP, "Gadget", PLURAL)
    (version,) = two["spec"]["versions"]
    version["subresources"] = {"status": {}}
    two["spec"]["versions"] = [version, {**version, "name": "v1beta1", "storage": False}]
    return two


@pytest.fixture
def living(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    kube = start_kube_lab(lab_root, lab_name("fidelity", request), kinds=KINDS)
    try:
        seed_client = SeedClient(kube.apiserver.access())
        install_crds(seed_client, ["trainer"])
        seed_client.create(_crd())
        wait_established(seed_client, [f"{PLURAL}.{GROUP}"])
        kube.lab.up(["velero"])
        yield kube
    finally:
        kube.lab.down()


def _more(kube: KubeLab) -> str:
    """The owner chain, the generateName object, the Secret and the custom resource with a status; the
    generated name."""
    with kube.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        owner = core.create_namespaced_config_map("src", {"metadata": {"name": "owner"}, "data": {"k": "v"}})
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
        core.create_namespaced_secret("src", {"metadata": {"name": "owned", "ownerReferences": [ref]},
                                              "stringData": {"password": SECRET_VALUE}})  # fmt: skip
        generated = core.create_namespaced_config_map("src", {"metadata": {"generateName": "gen-"}, "data": {"a": "b"}})
        gadget = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 3}}
        custom.create_namespaced_custom_object(GROUP, "v1beta1", "src", PLURAL, gadget)
        status = {"metadata": {"name": "g1"}, "status": {"phase": "Ready", "observed": 3}}
        custom.patch_namespaced_custom_object_status(GROUP, "v1", "src", PLURAL, "g1", status)
        return generated.metadata.name


def test_each_tool_restores_the_same_objects_and_where_they_differ(living: KubeLab, repo: Repository) -> None:
    _seed(living)
    generated = _more(living)
    velero = living.lab["velero"]
    assert isinstance(velero, VeleroServer)
    with BackupSession(repo) as session:
        assert (
            session.run_plugin(plugin, {"kubeconfig": living.kubeconfig, "include_namespaces": ["src"]}).status == "ok"
        )
        manifest = session.commit()
    backup = velero.backup("fidelity", "--include-namespaces=src")
    assert backup["status"]["phase"] == "Completed", backup["status"]

    restored = run_restore(repo, manifest, plugin, {"kubeconfig": living.kubeconfig},
                           options={"transforms": TRANSFORMS, "settle": 5})  # fmt: skip
    assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
    theirs = velero.restore("fidelity", "fidelity", f"--namespace-mappings=src:{VELERO_NS}")
    print(f"velero restore: {theirs['status']}")
    assert theirs["status"]["phase"] in ("Completed", "PartiallyFailed"), theirs["status"]

    with living.api_client() as api:
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)

        # Jobs that must not run twice. Velero leaves a completed Job out (restore.go, isCompleted: a Job with
        # status.completionTime is skipped); drtool restores it as a record that never runs
        assert COMPLETED in batch.read_namespaced_job("done", "dst").metadata.annotations
        assert not [j for j in batch.list_namespaced_job(VELERO_NS).items if j.metadata.name == "done"]
        # a Job still waiting: Velero restores it as it was (status dropped: resetMetadataAndStatus) and the Job
        # controller starts a new pod for it at once; Velero also restores the old pod, Pending at backup, without
        # its owner (resetMetadata drops ownerReferences), so nothing ever deletes that copy
        wait_for(lambda: _started_again(core, batch, "waiting"), "Velero's restored Job waiting starting again")
        pods = core.list_namespaced_pod(VELERO_NS, label_selector="job-name=waiting").items
        assert any(not pod.metadata.owner_references for pod in pods)
        # Kueue: Velero restores the admitted Job's Workload too, owner dropped, and Kueue admits that orphan:
        # quota held in the ClusterQueue for no Job (the restored Job's own new Workload then conflicts with it)
        wait_for(lambda: _orphan_admitted(custom), "Velero's restored Workload admitted without its Job")
        # drtool's Jobs stay suspended until a release step, the queue label set aside, no Workload, no pod
        for name in ("done", "waiting", "queued"):
            wait_for(lambda n=name: _suspended_seen(batch.read_namespaced_job(n, "dst")), f"{name} seen suspended")
        assert not core.list_namespaced_pod("dst").items
        assert not custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "dst", "workloads")["items"]

        # owner chains: drtool points the dependent at its owner's NEW uid; Velero drops ownerReferences
        # (restore.go, resetMetadata deletes them from every object)
        for namespace, refs in (("dst", True), (VELERO_NS, False)):
            owner = core.read_namespaced_config_map("owner", namespace)
            owned = core.read_namespaced_secret("owned", namespace)
            assert owned.data == {"password": _b64(SECRET_VALUE)}  # Secrets: equal
            got = [r.uid for r in owned.metadata.owner_references or []]
            assert got == ([owner.metadata.uid] if refs else []), namespace
            # generateName: both restore the recorded name, neither asks the API server for a new one
            assert core.read_namespaced_config_map(generated, namespace).data == {"a": "b"}
            # a custom resource of a two-version CRD: spec equal; status kept by drtool (written through
            # /status), dropped by Velero unless the restore names it (--status-include-resources)
            gadget = custom.get_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, "g1")
            assert gadget["spec"] == {"size": 3}
            assert gadget.get("status") == ({"phase": "Ready", "observed": 3} if refs else None), namespace

    # Secrets at rest: Velero's tarball in the bucket holds the value as the API server returned it
    tarball = living.lab["minio"].client().get_object(Bucket=BUCKET, Key=f"{PREFIX}/backups/fidelity/fidelity.tar.gz")
    assert _b64(SECRET_VALUE).encode() in gzip.decompress(tarball["Body"].read())


def _started_again(core: Any, batch: Any, job: str) -> bool:
    uid = batch.read_namespaced_job(job, VELERO_NS).metadata.uid
    pods = core.list_namespaced_pod(VELERO_NS, label_selector=f"job-name={job}").items
    return any(ref.uid == uid for pod in pods for ref in pod.metadata.owner_references or [])


def _orphan_admitted(custom: Any) -> bool:
    workloads = custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", VELERO_NS, "workloads")["items"]
    return any(not w["metadata"].get("ownerReferences") and is_true(w, "Admitted") for w in workloads)


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()
