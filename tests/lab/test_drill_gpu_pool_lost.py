"""Scenario drill ``gpu-pool-lost`` end to end in a living lab: no restore, Kueue admits elsewhere; from the
library, then again through `drtool drill` once the pool and its quota are put back.

The lab's L4 pool (two kwok nodes carrying the ``l4`` ResourceFlavor's labels) is deleted. Before the loss
a probe job on team-speech's queue is admitted onto ``l4`` and runs there; after it, and after the drill
drains the lost flavor's quota (the runbook's step, recorded as what a person did), the same probe is
admitted onto ``a100`` (borrowed through the cohort tree) and its pod runs on an A100 node. The record has
RPO 0 (nothing stored was lost) and the time from the loss to the probe running.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from drtool_lab import kube_seed
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.components.kube_apiserver import apply
from drtool_lab.components.kwok import KwokController
from drtool_lab.lab import Lab

from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.gpu_pool import GpuPoolLost, admits, drill_gpu_pool_lost
from drtool.kube.client import KubeClient
from drtool.kube.readings import items
from drtool.kube.settings import Connection
from tests.fixtures.core import Cli


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
