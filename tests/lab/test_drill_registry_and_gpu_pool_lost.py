"""Scenario drills ``registry-lost`` and ``gpu-pool-lost`` end to end in one living lab with its registry (they leave
each other's parts alone: the registry drill's Deployments run no pods, and the pool drill, last, loses the L4 nodes
and cq-speech's L4 quota that nothing before it uses; one lab start and seed for both).

``registry-lost``: two workloads pull images from the lab's registry by digest (a multi-platform index and a
single-platform image); the images they run are backed up by scanning the cluster (the images plugin), the registry
is wiped through its API (every manifest and blob those images name deleted), and the shipped plan
restore-plans/registry-restore.yaml pushes them back. The drill judges by reading each workload's image back through
the registry API by digest, and records RPO and time to service.

``gpu-pool-lost``: no restore, Kueue admits elsewhere; from the library, then again through `drtool drill` once the
pool and its quota are put back. The lab's L4 pool (two kwok nodes carrying the ``l4`` ResourceFlavor's labels) is
deleted. Before the loss a probe job on team-speech's queue is admitted onto ``l4`` and runs there; after it, and
after the drill drains the lost flavor's quota (the runbook's step, recorded as what a person did), the same probe
is admitted onto ``a100`` (borrowed through the cohort tree) and its pod runs on an A100 node. The record has RPO 0
(nothing stored was lost) and the time from the loss to the probe running.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from drtool_lab import kube_seed
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.components.kube_apiserver import apply
from drtool_lab.components.kwok import KwokController
from drtool_lab.lab import Lab
from drtool_lab.oci import lab_registry
from drtool_plugins.images.sample import push_image
from kubernetes import client as k8s

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.gpu_pool import GpuPoolLost, admits, drill_gpu_pool_lost
from drtool.drills.registry import RegistryLost
from drtool.drills.run import run_drill
from drtool.kube.client import KubeClient
from drtool.kube.readings import items
from drtool.kube.settings import Connection
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.plugin.toolkit.oci.registry import Registry
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab

PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "registry-restore.yaml"


def deployment(namespace: str, name: str, image: str) -> dict[str, object]:
    """A Deployment pinned to ``image`` by digest; no replicas: the drill reads references, kwok runs nothing."""
    pod = {"containers": [{"name": name, "image": image}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


@dataclasses.dataclass
class Pinned:
    """The lab's registry with two images, each pinned by digest in a Deployment, and a backup of them."""

    host: str
    registry: Registry
    images: dict[tuple[str, str], str]  # (namespace, deployment) -> image reference by digest
    trainer: str  # the one-platform image's digest
    repo: Repository
    manifest: Manifest


def pin_and_back_up(lab: Lab, store: Path) -> Pinned:
    seeded_cluster(lab)
    host = lab_registry(lab).host
    registry = Registry(host)
    served = push_image(registry, "speech/asr-server", "3.2.0")
    trainer = push_image(registry, "nlp/llm-trainer", "2.4.1", platforms=("linux/amd64",))
    admin = KubeClient(Connection.from_mapping(cluster_target(lab)))
    images = {
        ("team-speech", "asr-pinned"): f"{host}/speech/asr-server@{served.digest}",
        ("team-nlp", "trainer-pinned"): f"{host}/nlp/llm-trainer@{trainer.digest}",
    }
    for (namespace, name), image in images.items():
        body = json.dumps(deployment(namespace, name, image)).encode()
        admin.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=body, ok=(201, 409))
    repo = Repository.init(LocalBackend(store), passphrase=PASSPHRASE)
    source = {"kubeconfig": seeded_cluster(lab)["kubeconfig"], "registries": [host]}
    manifest = run_backup(repo, [get_plugin("images")], {"images": source})
    assert manifest.status == "complete"
    return Pinned(host, registry, images, trainer.digest, repo, manifest)


def test_registry_lost_is_drilled_and_every_image_pulls_by_digest(drill_lab: Lab, tmp_path: Path) -> None:
    pinned = pin_and_back_up(drill_lab, tmp_path / "store")
    host, registry, repo, manifest = pinned.host, pinned.registry, pinned.repo, pinned.manifest
    target = cluster_target(drill_lab)
    admin = KubeClient(Connection.from_mapping(target))
    loaded = check_file(PLAN, load_plugins(), {"TARGET_REGISTRY": host})
    catalog = Catalog(str(tmp_path / "catalog.db"))
    injector = RegistryLost(host)

    row = run_drill(injector, target, loaded, repo, manifest, catalog, step_targets={"images": {"registry": host}})

    assert row.ok, (row.error, row.checks)
    # the wipe was real: both images, their indexes' platform manifests, every blob (configs, layers) they name
    assert injector.wiped == {"images": 2, "manifests": (1 + 3) + (1 + 1), "blobs": 7 + 3}
    judged = {c["name"]: c for c in row.to_dict()["checks"] if c["name"].startswith("pulls ")}
    assert set(judged) == {f"pulls {image}" for image in pinned.images.values()}, judged
    assert all(c["ok"] for c in judged.values()), judged
    asr = pinned.images["team-speech", "asr-pinned"]
    assert registry.manifest_digest("speech/asr-server", asr.rsplit("@", 1)[1]) == asr.rsplit("@", 1)[1]
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.rpo_s is not None and row.rpo_s > 0
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 600
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["registry-lost"]["last"]["ok"]
    # the judgement can fail: one layer of the trainer image gone again, its check names the blob
    layer = injector.tree("nlp/llm-trainer", pinned.trainer)[1][-1]
    registry.delete("nlp/llm-trainer", "blobs", layer)
    verdicts = {j.name: j for j in injector.judge(admin)}
    assert not verdicts[f"pulls {pinned.images['team-nlp', 'trainer-pinned']}"].ok
    assert verdicts[f"pulls {pinned.images['team-nlp', 'trainer-pinned']}"].detail.endswith(f"missing {layer}")
    assert verdicts[f"pulls {pinned.images['team-speech', 'asr-pinned']}"].ok


def test_registry_lost_through_the_cli_prints_its_record(drill_lab: Lab, cli: Cli, tmp_path: Path) -> None:
    pinned = pin_and_back_up(drill_lab, tmp_path / "store")  # the images back in place first, whatever ran before
    values = tmp_path / "values.yaml"
    values.write_text(f"TARGET_REGISTRY: '{pinned.host}'\n")

    proc = cli("--store", pinned.repo.backend.url, "drill", "registry-lost", "--registry", pinned.host,
               "--plan", str(PLAN), "--values", str(values), "--kubeconfig", cluster_target(drill_lab)["kubeconfig"],
               "--json", check=True)  # fmt: skip

    row = json.loads(proc.stdout)
    assert row["ok"] and row["plan_name"] == "registry-restore" and row["steps"][0]["status"] == "ok", row
    assert {c["name"] for c in row["checks"]} == {f"pulls {image}" for image in pinned.images.values()}
    assert all(c["ok"] for c in row["checks"]) and 0 < row["time_to_service_s"] < 600, row


# --- gpu-pool-lost (last: the pool stays lost) --------------------------------------------------------------


def test_gpu_pool_lost_is_drilled_and_kueue_admits_on_the_remaining_flavor(drill_lab: Lab, tmp_path: Path) -> None:
    seeded_cluster(drill_lab)
    target = cluster_target(drill_lab)
    client = KubeClient(Connection.from_mapping(target))
    before = admits(client, "before", "team-speech", "speech-queue", "l4", dt.timedelta(minutes=3))
    assert before.ok and str(before.facts["node"]).startswith("l4-pool-"), before.detail
    catalog = Catalog(str(tmp_path / "catalog.db"))
    injector = GpuPoolLost(lost="l4", remaining="a100", namespace="team-speech", queue="speech-queue")

    row = drill_gpu_pool_lost(injector, target, catalog)

    assert row.ok, (row.error, row.checks)
    assert sorted(n["metadata"]["name"] for n in injector.nodes) == ["l4-pool-0", "l4-pool-1"]
    names = {n["metadata"]["name"] for n in items(client, "/api/v1/nodes")}
    assert not names & {"l4-pool-0", "l4-pool-1"} and "a100-pool-0" in names
    assert list(injector.queues) == ["cq-speech"]
    (check,) = row.to_dict()["checks"]
    assert check["flavor"] == "a100" and str(check["node"]).startswith("a100-pool-"), check
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.rpo_s == 0.0 and row.time_to_service_s is not None and 0 < row.time_to_service_s < 300
    assert row.to_dict()["manual"] == ["drained flavor l4's quota in ClusterQueue(s) cq-speech"]
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["gpu-pool-lost"]["last"]["ok"]


def put_back_the_l4_pool(lab: Lab) -> None:
    """The lab as seeded again: the L4 nodes (kwok creates them idempotently) and cq-speech's L4 quota."""
    kwok = lab.first("kwok")
    assert isinstance(kwok, KwokController)
    kwok.started()
    (queue,) = [o for o in kube_seed.cluster_objects() if o["metadata"]["name"] == "cq-speech"]
    with kwok.access().session() as session:
        apply(session, f"{kwok.server}/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq-speech", queue)


def test_gpu_pool_lost_through_the_cli_prints_its_record(drill_lab: Lab, cli: Cli, tmp_path: Path) -> None:
    seeded_cluster(drill_lab)
    put_back_the_l4_pool(drill_lab)
    kubeconfig = cluster_target(drill_lab)["kubeconfig"]
    client = KubeClient(Connection.from_mapping({"kubeconfig": kubeconfig}))
    until_l4 = admits(client, "put-back", "team-speech", "speech-queue", "l4", dt.timedelta(minutes=3))
    assert until_l4.ok, until_l4.detail  # the pool serves again before it is lost again

    proc = cli("drill", "gpu-pool-lost", "--pool", "l4=a100", "--queue", "team-speech/speech-queue",
               "--kubeconfig", kubeconfig, "--json", check=True)  # fmt: skip

    row = json.loads(proc.stdout)
    assert row["ok"] and row["scenario"] == "gpu-pool-lost" and row["rpo_s"] == 0.0, row
    assert row["checks"][0]["flavor"] == "a100" and 0 < row["time_to_service_s"] < 300, row
    matrix_rows = {r["scenario"]: r for r in json.loads(cli("drills", "--matrix", "--json", check=True).stdout)}
    assert matrix_rows["gpu-pool-lost"]["last"]["id"] == row["id"]


class _Raced(KubeClient):
    """A client whose next replace finds the object changed since it was read: another writer (Kueue, writing
    the queue's status) got there first. The change is a real write to the server, just before the replace."""

    races = 1

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "PUT" and self.races:
            self.races -= 1
            label = json.dumps({"metadata": {"labels": {"raced": str(self.races)}}}).encode()
            super().request("PATCH", path, body=label, content_type="application/merge-patch+json")
        return super().request(method, path, **kwargs)


def test_the_drain_retries_a_queue_changed_between_its_read_and_its_write(kube_target: KubeLab) -> None:
    """The drill's drain is a replace at the version it read; a conflict is read again and retried."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
        "spec": {
            "group": "kueue.x-k8s.io", "scope": "Cluster",
            "names": {"plural": "clusterqueues", "singular": "clusterqueue", "kind": "ClusterQueue"},
            "versions": [{
                "name": "v1beta2", "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }],
        },
    }  # fmt: skip
    flavors = [{"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]} for name in ("l4", "a100")]
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq-speech"},
             "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}]}}  # fmt: skip
    with kube_target.api_client() as api:
        k8s.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        custom = k8s.CustomObjectsApi(api)
        for _ in range(100):  # until the new type is served
            try:
                custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", queue)
                break
            except k8s.ApiException as exc:
                assert exc.status == 404, exc
                time.sleep(0.1)
    client = _Raced(Connection.from_mapping({"kubeconfig": kube_target.kubeconfig}))
    drill = GpuPoolLost(lost="l4", remaining="a100", namespace="team-speech", queue="speech-queue")

    assert drill.drain(client) == ["cq-speech"] and not client.races  # the first replace met the other writer
    drained = client.get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq-speech")
    quotas = {f["name"]: f["resources"][0]["nominalQuota"] for f in drained["spec"]["resourceGroups"][0]["flavors"]}
    assert quotas == {"l4": 0, "a100": 8} and drained["metadata"]["labels"] == {"raced": "0"}
    assert drill.queues["cq-speech"] == queue["spec"]  # what a put-back restores: the spec before the drain
