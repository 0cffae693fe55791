"""`drtool audit` against a living lab: the cluster items graded from the good and the bad examples.

One living lab for the module (controllers, scheduler, kwok's tainted GPU nodes), seeded with
``drtool_lab.kube_seed_audit``: namespace ``audit-good`` must pass each item the cluster answers and
``audit-bad`` fail each for its own reason, read through the lab's read-only identity (what a backup role
may do). The CLI test checks the exit code, the JSON, the HTML and the Prometheus textfile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from drtool_lab import kube_seed_audit
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.lab import LIVING_KINDS, Lab
from kubernetes import client, config

from drtool.audit.cluster import ClusterView, read_cluster
from drtool.audit.grades import Grade
from drtool.audit.workloads import gpu_isolation, inference_spread, pdb_drain, preemptible_save
from drtool.kube.settings import Connection
from tests.fixtures.core import Cli

CLUSTER_ITEMS = (preemptible_save, inference_spread, pdb_drain, gpu_isolation)


@pytest.fixture(scope="module")
def server(lab_root: Path) -> Iterator[KubeApiserver]:
    lab = Lab("audit", root=lab_root)
    try:
        lab.up(LIVING_KINDS)
        server = lab["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        kube_seed_audit.seed(server.access())
        yield server
    finally:
        lab.down()


def view(server: KubeApiserver, namespace: str) -> ClusterView:
    return read_cluster(Connection(kubeconfig=str(server.readonly_kubeconfig)), [namespace])


def grades(server: KubeApiserver, namespace: str) -> dict[str, Grade]:
    seen = view(server, namespace)
    return {g.item: g for g in (item(seen) for item in CLUSTER_ITEMS)}


def test_the_good_examples_pass_every_cluster_item(server: KubeApiserver) -> None:
    got = grades(server, kube_seed_audit.GOOD)
    assert {k: g.status for k, g in got.items()} == dict.fromkeys(got, "pass"), got
    assert "grace 120s covers its last checkpoint save of 45s" in got["preemptible-save"].evidence[0]
    assert "topology spread over kubernetes.io/hostname" in got["inference-spread"].evidence[0]
    assert "lets a drain evict (2 replicas)" in got["pdb-drain"].evidence[0]
    # kwok's GPU pools carry the flavors' nvidia.com/gpu taint; the cpu pool has no GPUs and is not counted
    assert got["gpu-isolation"].evidence[0] == "6 of 6 GPU nodes tainted"
    assert "audit-good/pretrain: backoffLimit 2" in got["gpu-isolation"].evidence


def test_each_bad_example_fails_for_its_reason(server: KubeApiserver) -> None:
    got = grades(server, kube_seed_audit.BAD)
    assert {k: g.status for k, g in got.items()} == dict.fromkeys(got, "fail"), got
    assert got["preemptible-save"].evidence == [
        "audit-bad/pretrain: grace 30s is shorter than its last checkpoint save of 300s"
    ]
    assert got["inference-spread"].evidence == [
        "audit-bad/llm-serving: 3 replicas, no topology spread and no anti-affinity"
    ]
    assert got["pdb-drain"].evidence == ["audit-bad/llm-serving: blocks a drain: minAvailable 3 of 3 replicas"]
    gpu = got["gpu-isolation"]
    assert gpu.evidence[0] == "6 of 6 GPU nodes tainted"  # the nodes are fine; the Job is what fails
    assert "audit-bad/pretrain: backoffLimit 10 (over 3) and no podFailurePolicy" in gpu.evidence[1]


def test_an_untainted_gpu_node_fails_isolation(server: KubeApiserver) -> None:
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(server.admin_kubeconfig)))
    node = core.create_node({"metadata": {"name": "gpu-untainted"}})
    try:
        core.patch_node_status("gpu-untainted", {"status": {"capacity": {"nvidia.com/gpu": "8"}}})
        grade = gpu_isolation(view(server, kube_seed_audit.GOOD))
        assert grade.status == "fail"
        assert grade.evidence[0] == "6 of 7 GPU nodes tainted; untainted: gpu-untainted", grade.evidence
    finally:
        core.delete_node(node.metadata.name)


def test_the_cli_grades_exits_12_and_writes_json_html_and_metrics(
    server: KubeApiserver, cli: Cli, tmp_path: Path
) -> None:
    out, metrics = tmp_path / "report", tmp_path / "audit.prom"
    args = ["audit", "--kubeconfig", str(server.readonly_kubeconfig), "--out", str(out), "--metrics", str(metrics)]
    bad = cli(*args, "-n", kube_seed_audit.BAD, "--json")
    assert bad.returncode == 12, bad.stderr
    assert "checklist item(s) fail: " in bad.stderr and "pdb-drain" in bad.stderr and "Traceback" not in bad.stderr
    card = json.loads((out / "audit.json").read_text())
    assert card["verdict"] == "fail" and card["kind"] == "audit"
    status = {i["item"]: i["status"] for i in card["items"]}
    # no plans, checkpoints or drills given: those items say unknown, or fail where absence is the failure
    assert status == {
        "objectives": "unknown",
        "checkpoints": "unknown",
        "resume-drilled": "fail",  # no drill resumed past a torn checkpoint
        "preemptible-save": "fail",
        "inference-spread": "fail",
        "pdb-drain": "fail",
        "gpu-isolation": "fail",
        "independence": "unknown",
        "drills-recent": "fail",
    }
    html = (out / "audit.html").read_text()
    assert 'id="item-pdb-drain"' in html and "blocks a drain: minAvailable 3 of 3 replicas" in html
    text = metrics.read_text()
    assert 'drtool_audit_item_status{item="pdb-drain"} -1.0' in text
    assert 'drtool_audit_item_status{item="objectives"} 0.0' in text
    good = cli(*args, "-n", kube_seed_audit.GOOD)
    assert good.returncode == 12  # no drill recorded: drills-recent fails even where the cluster is good
    assert 'drtool_audit_item_status{item="pdb-drain"} 1.0' in metrics.read_text()
    assert "go-live audit: fail" in good.stdout
