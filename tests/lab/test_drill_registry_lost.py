"""Scenario drill ``registry-lost`` end to end in a living lab with its registry.

Two workloads pull images from the lab's registry by digest (a multi-platform index and a single-platform
image); the images they run are backed up by scanning the cluster (the images plugin), the registry is
wiped through its API (every manifest and blob those images name deleted), and the shipped plan
restore-plans/registry-restore.yaml pushes them back. The drill judges by reading each workload's image
back through the registry API by digest, and records RPO and time to service.
"""

from __future__ import annotations

import json
from pathlib import Path

from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.lab import Lab
from drtool_lab.oci import lab_registry
from drtool_plugins.images.sample import push_image

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.registry import RegistryLost
from drtool.drills.run import run_drill
from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.plugin.toolkit.oci.registry import Registry
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE

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


def test_registry_lost_is_drilled_and_every_image_pulls_by_digest(drill_lab: Lab, tmp_path: Path) -> None:
    seeded_cluster(drill_lab)
    host = lab_registry(drill_lab).host
    registry = Registry(host)
    served = push_image(registry, "speech/asr-server", "3.2.0")
    trainer = push_image(registry, "nlp/llm-trainer", "2.4.1", platforms=("linux/amd64",))
    target = cluster_target(drill_lab)
    admin = KubeClient(Connection.from_mapping(target))
    pinned = {
        ("team-speech", "asr-pinned"): f"{host}/speech/asr-server@{served.digest}",
        ("team-nlp", "trainer-pinned"): f"{host}/nlp/llm-trainer@{trainer.digest}",
    }
    for (namespace, name), image in pinned.items():
        body = json.dumps(deployment(namespace, name, image)).encode()
        admin.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=body, ok=(201, 409))
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    source = {"kubeconfig": seeded_cluster(drill_lab)["kubeconfig"], "registries": [host]}
    manifest = run_backup(repo, [get_plugin("images")], {"images": source})
    assert manifest.status == "complete"
    loaded = check_file(PLAN, load_plugins(), {"TARGET_REGISTRY": host})
    catalog = Catalog(str(tmp_path / "catalog.db"))
    injector = RegistryLost(host)

    row = run_drill(injector, target, loaded, repo, manifest, catalog, step_targets={"images": {"registry": host}})

    assert row.ok, (row.error, row.checks)
    # the wipe was real: both images, their indexes' platform manifests, every blob (configs, layers) they name
    assert injector.wiped == {"images": 2, "manifests": (1 + 3) + (1 + 1), "blobs": 7 + 3}
    judged = {c["name"]: c for c in row.to_dict()["checks"] if c["name"].startswith("pulls ")}
    assert set(judged) == {f"pulls {image}" for image in pinned.values()}, judged
    assert all(c["ok"] for c in judged.values()), judged
    assert registry.manifest_digest("speech/asr-server", served.digest) == served.digest
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.rpo_s is not None and row.rpo_s > 0
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 600
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["registry-lost"]["last"]["ok"]
    # the judgement can fail: one layer of the trainer image gone again, its check names the blob
    layer = injector.tree("nlp/llm-trainer", trainer.digest)[1][-1]
    registry.delete("nlp/llm-trainer", "blobs", layer)
    verdicts = {j.name: j for j in injector.judge(admin)}
    assert not verdicts[f"pulls {pinned['team-nlp', 'trainer-pinned']}"].ok
    assert verdicts[f"pulls {pinned['team-nlp', 'trainer-pinned']}"].detail.endswith(f"missing {layer}")
    assert verdicts[f"pulls {pinned['team-speech', 'asr-pinned']}"].ok
