"""Scenario drills end to end in one living lab, each with its shipped plan.

``kueue-config-deleted``: the lab's Kueue configuration backed up, every ClusterQueue and ResourceFlavor
deleted, restored with restore-plans/kueue-quotas-only.yaml (whose ``kueue-admits`` check queues a probe
job and waits for Kueue to admit it). ``namespace-deleted``: one team namespace backed up on its own,
deleted (the namespace controller empties it), restored with restore-plans/namespace-restore.yaml, its
Deployments serving again and its owner chain pointing at the new UIDs. Each drill is recorded in the
catalog with its actual RPO and time to service, and the matrix shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.lab import Lab
from kubernetes import client, config

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.kueue import KueueConfigDeleted
from drtool.drills.namespace import NamespaceDeleted
from drtool.drills.run import run_drill
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"
PLAN = PLANS / "kueue-quotas-only.yaml"
KUEUE = ("kueue.x-k8s.io", "v1beta2")


@pytest.fixture(scope="module")
def lab(lab_root: Path) -> Iterator[Lab]:
    lab = Lab("drill-kueue", root=lab_root)
    try:
        yield lab
    finally:
        lab.down()


def test_kueue_config_deleted_is_drilled_and_recorded(lab: Lab, tmp_path: Path) -> None:
    source = seeded_cluster(lab)
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    manifest = run_backup(repo, [get_plugin("kueue")], {"kueue": source})
    assert manifest.status == "complete"
    target = cluster_target(lab)
    loaded = check_file(PLAN, load_plugins(), {"TARGET_KUBECONFIG": target["kubeconfig"]})
    catalog = Catalog(str(tmp_path / "catalog.db"))
    injector = KueueConfigDeleted()

    row = run_drill(injector, target, loaded, repo, manifest, catalog)

    assert row.ok, (row.error, row.checks)
    assert {"cq-nlp", "cq-vision"} <= set(injector.deleted["clusterqueues"])
    assert {"a100", "h100", "l4"} <= set(injector.deleted["resourceflavors"])
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.rpo_s is not None and row.rpo_s > 0
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 600
    checks = {c["name"]: c for c in row.to_dict()["checks"]}
    assert any("queue-admits" in name and c["ok"] for name, c in checks.items()), checks
    # what Kueue serves again: the queues the drill deleted, with their cohorts
    api = config.new_client_from_config(config_file=target["kubeconfig"])
    queues = client.CustomObjectsApi(api).list_cluster_custom_object(*KUEUE, "clusterqueues")["items"]
    assert set(injector.deleted["clusterqueues"]) <= {q["metadata"]["name"] for q in queues}
    # recorded: the catalog's matrix shows the scenario drilled, ok, with its age and figures
    assert [r.id for r in ScenarioLog(catalog).all()] == [row.id]
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    last = rows["kueue-config-deleted"]["last"]
    assert last["ok"] and last["age_s"] >= 0 and last["time_to_service_s"] == row.time_to_service_s
    assert rows["namespace-deleted"]["last"] is None
    html = matrix.to_html(list(rows.values()), "now")
    assert 'id="scenario-kueue-config-deleted"' in html and "never drilled" in html


def test_namespace_deleted_is_drilled_with_owners_relinked(lab: Lab, tmp_path: Path) -> None:
    source = seeded_cluster(lab) | {"include_namespaces": ["team-vision"]}
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    manifest = run_backup(repo, [get_plugin("kubernetes")], {"kubernetes": source})
    assert manifest.status == "complete"
    target = cluster_target(lab)
    values = {"TARGET_KUBECONFIG": target["kubeconfig"], "NAMESPACE": "team-vision"}
    loaded = check_file(PLANS / "namespace-restore.yaml", load_plugins(), values)
    catalog = Catalog(str(tmp_path / "catalog.db"))
    api = config.new_client_from_config(config_file=target["kubeconfig"])
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    old_uid = apps.read_namespaced_deployment("model-server", "team-vision").metadata.uid

    row = run_drill(NamespaceDeleted("team-vision"), target, loaded, repo, manifest, catalog, detect_timeout=180)

    assert row.ok, (row.error, row.checks)
    checks = {c["name"]: c["ok"] for c in row.to_dict()["checks"]}
    assert len(checks) == 3 and all(checks.values()), checks
    assert row.rpo_s is not None and row.time_to_service_s is not None and row.time_to_service_s > 0
    # owners relinked: the ConfigMap the Deployment owns points at the restored Deployment's new UID
    deployment = apps.read_namespaced_deployment("model-server", "team-vision")
    assert deployment.metadata.uid != old_uid
    owned = core.read_namespaced_config_map("model-server-config", "team-vision")
    assert [o.uid for o in owned.metadata.owner_references] == [deployment.metadata.uid]
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["namespace-deleted"]["last"]["ok"]
