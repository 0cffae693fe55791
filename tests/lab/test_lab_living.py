"""The living lab: real controllers, a real scheduler, kwok's GPU nodes, Kueue and cert-manager at work.

One living lab is started and seeded for the whole module (``living``), so each test reads what the
platform does, through the official ``kubernetes`` client: the garbage collector, Deployments that become
Available on the GPU nodes the scheduler chose, Kueue admitting a Job onto a flavor and keeping one pending
when its ClusterQueue is inactive, cert-manager issuing a certificate. Each test works in its own
namespace and leaves the seeded objects alone.

The same lab serves two more groups that had a living lab each (one lab start and seed instead of three;
docs/testing.md has the figures): the scenario drills that restore the seed with its shipped plans
(``--- drills``, first: Kueue's configuration and team-vision deleted and restored, each drill proving the
restored state before the tests after it use it), and `drtool audit` grading the examples
``drtool_lab.kube_seed_audit`` seeds beside the base seed (``--- audit``: namespace ``audit-good`` passes
each item the cluster answers, ``audit-bad`` fails each for its own reason, read through the lab's read-only
identity, what a backup role may do).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab import kube_seed, kube_seed_audit
from drtool_lab.cluster import cluster_target, seeded_cluster
from drtool_lab.components import KINDS
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.components.kueue import ensure_metrics_certs, webhook_configurations
from drtool_lab.components.kwok import node_pools
from drtool_lab.lab import LIVING_KINDS, Lab
from kubernetes import client, config

from drtool.audit.cluster import ClusterView, read_cluster
from drtool.audit.grades import Grade
from drtool.audit.workloads import gpu_isolation, inference_spread, pdb_drain, preemptible_save
from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.kueue import KueueConfigDeleted
from drtool.drills.namespace import NamespaceDeleted
from drtool.drills.run import run_drill
from drtool.errors import SourceError
from drtool.kube.readings import conditions, is_true
from drtool.kube.settings import Connection
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import wait_for

Obj = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
PLANS = Path(__file__).resolve().parents[2] / "restore-plans"
CLUSTER_ITEMS = (preemptible_save, inference_spread, pdb_drain, gpu_isolation)


@dataclasses.dataclass
class Living:
    lab: Lab
    api: Any  # kubernetes.client.ApiClient with the admin kubeconfig

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name


@pytest.fixture(scope="module")
def living(lab_root: Path) -> Iterator[Living]:
    lab = Lab("living", root=lab_root)
    try:
        lab.up(LIVING_KINDS)
        seeded_cluster(lab)  # the flavors, cohorts, queues and teams, no bulk content; Kueue's verdicts awaited
        server = lab["kube-apiserver"]
        assert isinstance(server, KubeApiserver)
        kube_seed_audit.seed(server.access())  # the audit's good and bad examples, each in its own namespace
        yield Living(lab, config.new_client_from_config(config_file=str(server.admin_kubeconfig)))
    finally:
        lab.down()


def flavor_placement(flavor: str) -> tuple[dict[str, str], list[Obj]]:
    """The node selector and tolerations a pod needs to run on the nodes of a seeded GPU flavor."""
    accelerator, instance = kube_seed.GPU_FLAVORS[flavor]
    spec = kube_seed.render("flavor", name=flavor, accelerator=accelerator, instance=instance)[0]["spec"]
    return spec["nodeLabels"], spec["tolerations"]


def pool_nodes(flavor: str) -> set[str]:
    pool = next(p for p in node_pools() if p.get("flavor") == flavor)
    return {f"{pool['name']}-{i}" for i in range(pool["nodes"])}


def gpu_container(gpus: int = 1) -> Obj:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"name": "main", "image": "registry.ml.example.com/trainer:1.0", "resources": resources}


# --- drills (first: each restores the seed and proves it, for the tests after it) ------------------------------
# kueue-config-deleted: the lab's Kueue configuration backed up, every ClusterQueue and ResourceFlavor deleted,
# restored with restore-plans/kueue-quotas-only.yaml (whose kueue-admits check queues a probe job and waits for
# Kueue to admit it). namespace-deleted: one team namespace backed up on its own, deleted (the namespace
# controller empties it), restored with restore-plans/namespace-restore.yaml, its Deployments serving again
# and its owner chain pointing at the new UIDs. Each drill is recorded in the catalog with its actual RPO and
# time to service, and the matrix shows it.


def test_kueue_config_deleted_is_drilled_and_recorded(living: Living, tmp_path: Path) -> None:
    source = seeded_cluster(living.lab)
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    manifest = run_backup(repo, [get_plugin("kueue")], {"kueue": source})
    assert manifest.status == "complete"
    target = cluster_target(living.lab)
    loaded = check_file(PLANS / "kueue-quotas-only.yaml", load_plugins(), {"TARGET_KUBECONFIG": target["kubeconfig"]})
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


def test_namespace_deleted_is_drilled_with_owners_relinked(living: Living, tmp_path: Path) -> None:
    source = seeded_cluster(living.lab) | {"include_namespaces": ["team-vision"]}
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    manifest = run_backup(repo, [get_plugin("kubernetes")], {"kubernetes": source})
    assert manifest.status == "complete"
    target = cluster_target(living.lab)
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


# --- the cluster runs ---------------------------------------------------------------------------------


def test_every_component_runs_and_the_gpu_nodes_are_ready(living: Living) -> None:
    assert [c.kind for c in living.lab.components.values() if c.healthy()] == list(LIVING_KINDS)
    nodes = wait_for(
        lambda: [n for n in living.core.list_node().items if _ready(n)] if _all_ready(living) else None,
        "every kwok node Ready",
    )
    assert len(nodes) == sum(p["nodes"] for p in node_pools())
    a100 = next(n for n in nodes if n.metadata.name in pool_nodes("a100"))
    labels, _ = flavor_placement("a100")
    assert labels.items() <= a100.metadata.labels.items()
    assert a100.spec.taints[0].key == "nvidia.com/gpu" and a100.status.allocatable["nvidia.com/gpu"] == "8"
    # the ServiceAccount controller gives a new namespace its `default` ServiceAccount (admission needs it)
    ns = living.namespace("sa")
    wait_for(lambda: living.core.list_namespaced_service_account(ns).items, "the default ServiceAccount")


def _ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def _all_ready(living: Living) -> bool:
    nodes = living.core.list_node().items
    return len(nodes) == sum(p["nodes"] for p in node_pools()) and all(_ready(n) for n in nodes)


def test_a_deployment_becomes_available_on_the_gpu_nodes_the_scheduler_chose(living: Living) -> None:
    ns = living.namespace("serve")
    selector, tolerations = flavor_placement("a100")
    labels = {"app": "server"}
    pod = {"nodeSelector": selector, "tolerations": tolerations, "containers": [gpu_container()]}
    body = {
        "metadata": {"name": "server"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    living.apps.create_namespaced_deployment(ns, body)
    deployment = wait_for(
        lambda: _available(living.apps.read_namespaced_deployment(name="server", namespace=ns)),
        "Deployment Available",
    )
    assert deployment.status.available_replicas == 3
    pods = living.core.list_namespaced_pod(ns).items
    assert len(pods) == 3 and {p.status.phase for p in pods} == {"Running"}
    assert {p.spec.node_name for p in pods} <= pool_nodes("a100")
    # ServiceAccount admission is on: each pod got the namespace's default ServiceAccount and its token
    assert all(p.spec.service_account_name == "default" for p in pods)
    assert all(any(v.projected for v in p.spec.volumes or []) for p in pods)


def _available(deployment: Any) -> Any:
    available = deployment.status.conditions or []
    return deployment if any(c.type == "Available" and c.status == "True" for c in available) else None


def test_the_garbage_collector_deletes_dependents_of_a_missing_owner_and_keeps_the_others(living: Living) -> None:
    ns = living.namespace("gc")
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}
    body = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
    }
    deployment = living.apps.create_namespaced_deployment(ns, body)
    # the owner chain the controllers build: Deployment -> ReplicaSet -> Pod, with real UIDs
    rs = wait_for(lambda: living.apps.list_namespaced_replica_set(ns).items, "a ReplicaSet")[0]
    assert rs.metadata.owner_references[0].uid == deployment.metadata.uid
    pods = wait_for(lambda: _running(living, ns, 2), "two Running pods")
    assert {p.metadata.owner_references[0].uid for p in pods} == {rs.metadata.uid}

    def owned_by(name: str, uid: str) -> Obj:
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": uid}
        return {"metadata": {"name": f"owned-by-{name}", "ownerReferences": [ref]}, "data": {"k": "v"}}

    living.core.create_namespaced_config_map(ns, owned_by("web", deployment.metadata.uid))
    living.core.create_namespaced_config_map(ns, owned_by("gone", str(uuid.uuid4())))  # an owner that never was
    wait_for(lambda: "owned-by-gone" not in _config_maps(living, ns), "the orphan collected")
    time.sleep(2)  # the collector had its chance at the others too
    assert "owned-by-web" in _config_maps(living, ns)
    assert len(living.apps.list_namespaced_replica_set(ns).items) == 1
    assert {p.metadata.name for p in _running(living, ns, 2) or []} == {p.metadata.name for p in pods}
    # once the owner goes, the whole chain below it goes (background cascading deletion)
    living.apps.delete_namespaced_deployment("web", ns, propagation_policy="Background")
    wait_for(lambda: not living.apps.list_namespaced_replica_set(ns).items, "the ReplicaSet collected")
    wait_for(lambda: not living.core.list_namespaced_pod(ns).items, "the pods collected")
    wait_for(lambda: "owned-by-web" not in _config_maps(living, ns), "the ConfigMap collected")


def _running(living: Living, ns: str, count: int) -> list[Any] | None:
    pods = [p for p in living.core.list_namespaced_pod(ns).items if p.status.phase == "Running"]
    return pods if len(pods) == count else None


def _config_maps(living: Living, ns: str) -> set[str]:
    return {c.metadata.name for c in living.core.list_namespaced_config_map(ns).items}


# --- Kueue -----------------------------------------------------------------------------------------------


def gpu_job(name: str, queue: str, gpus: int = 1) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [gpu_container(gpus)]}},
        },
    }


def workload_of(living: Living, ns: str, job: str) -> Obj | None:
    items = living.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    return next((w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job), None)


def test_kueue_admits_a_job_from_a_seeded_queue_onto_its_flavor_and_its_pod_runs(living: Living) -> None:
    team = next(t for t in kube_seed.TEAMS if t.namespace == "team-vision")
    job = living.batch.create_namespaced_job(team.namespace, gpu_job("admitted", team.local_queue))
    assert job.spec.suspend  # Kueue's webhook suspends it until admission

    def admitted() -> Obj | None:
        workload = workload_of(living, team.namespace, "admitted")
        return workload if workload and (workload.get("status") or {}).get("admission") else None

    workload = wait_for(admitted, "the Workload admitted")
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assert workload["status"]["admission"]["clusterQueue"] == team.cluster_queue
    assert assignment["flavors"]["nvidia.com/gpu"] == team.flavor == "a100"
    pods = wait_for(
        lambda: [p for p in living.core.list_namespaced_pod(team.namespace, label_selector="job-name=admitted").items
                 if p.status.phase in ("Running", "Succeeded")],
        "the Job's pod running on a node",
    )  # fmt: skip
    assert pods[0].spec.node_name in pool_nodes("a100")
    labels, _ = flavor_placement("a100")
    assert labels.items() <= pods[0].spec.node_selector.items()  # injected by Kueue from the flavor
    wait_for(lambda: living.batch.read_namespaced_job("admitted", team.namespace).status.succeeded, "Job complete")
    living.batch.delete_namespaced_job("admitted", team.namespace, propagation_policy="Background")


def test_an_inactive_cluster_queue_keeps_its_workload_pending_and_says_why(living: Living) -> None:
    ns = living.namespace("broken")
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": f"cq-{ns}"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "b200", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
                }
            ],
        },
    }
    living.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", queue)
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"}}
    local["spec"] = {"clusterQueue": f"cq-{ns}"}
    living.custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", local)
    try:
        living.batch.create_namespaced_job(ns, gpu_job("waiting", "lq"))

        def inactive() -> Obj | None:
            cq = living.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", f"cq-{ns}")
            active = conditions(cq).get("Active")
            return active if active and active["status"] == "False" else None

        active = wait_for(inactive, "the ClusterQueue reported inactive")
        assert active["reason"] == "FlavorNotFound" and "b200" in active["message"]

        def pending() -> Obj | None:
            workload = workload_of(living, ns, "waiting")
            return conditions(workload or {}).get("QuotaReserved")

        reserved = wait_for(pending, "the Workload's QuotaReserved condition")
        assert reserved["status"] == "False" and f"cq-{ns}" in reserved["message"], reserved
        time.sleep(2)
        assert living.batch.read_namespaced_job("waiting", ns).spec.suspend
        assert not living.core.list_namespaced_pod(ns).items
    finally:
        living.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", f"cq-{ns}")


# --- cert-manager ----------------------------------------------------------------------------------------


def test_cert_manager_issues_a_certificate_from_a_self_signed_issuer(living: Living) -> None:
    ns = living.namespace("certs")
    group, version = "cert-manager.io", "v1"
    issuer = {"apiVersion": f"{group}/{version}", "kind": "Issuer", "metadata": {"name": "self"}}
    issuer["spec"] = {"selfSigned": {}}
    living.custom.create_namespaced_custom_object(group, version, ns, "issuers", issuer)
    cert = {"apiVersion": f"{group}/{version}", "kind": "Certificate", "metadata": {"name": "web"}}
    cert["spec"] = {
        "secretName": "web-tls",
        "dnsNames": ["web.lab.example"],
        "issuerRef": {"name": "self", "kind": "Issuer", "group": group},
    }
    living.custom.create_namespaced_custom_object(group, version, ns, "certificates", cert)

    def issued_and_ready() -> Obj | None:
        """cert-manager's readiness controller can call the Certificate Ready (its Secret is valid) before the
        issuing controller records the revision it issued (CI: Ready with no ``status.revision``)."""
        got = living.custom.get_namespaced_custom_object(group, version, ns, "certificates", "web")
        return got if is_true(got, "Ready") and "revision" in got.get("status", {}) else None

    issued = wait_for(issued_and_ready, "the Certificate Ready with its revision")
    assert issued["status"]["revision"] == 1
    secret = living.core.read_namespaced_secret("web-tls", ns)
    assert secret.type == "kubernetes.io/tls" and secret.data["tls.crt"]


# --- doctor and footprint ----------------------------------------------------------------------------------


def test_doctor_lists_every_component_and_finds_the_built_ones(living: Living, cli: Cli) -> None:
    out = cli("lab", "doctor", check=True, env={"COLUMNS": "250"}).stdout
    for kind in KINDS:
        assert kind in out
    for kind in [k for k in LIVING_KINDS if KINDS[k].binaries]:  # Go builds the fixture just used (not etcd, lab-node)
        row = next(line for line in out.splitlines() if line.startswith(f"│ {kind} "))
        assert "found" in row and "go build" in row, row
    assert "k8s.io/kubernetes@v1.37.2" in out and "sigs.k8s.io/kueue@v0.17.0" in out
    assert "github.com/vmware-tanzu/velero@v1.18.3" in out


def test_a_living_lab_with_three_gpu_pools_stays_under_3_gib(living: Living) -> None:
    rss = {c.name: _rss(c.pid) for c in living.lab.components.values()}
    total = sum(rss.values())
    print(f"living lab RSS: {total / 2**20:.0f} MiB " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in rss.items()))
    assert len([p for p in node_pools() if "flavor" in p]) == 3
    assert total < 3 * 2**30


def _rss(pid: int | None) -> int:
    with open(f"/proc/{pid}/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return int(kib) * 1024


# --- audit ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(living: Living) -> KubeApiserver:
    server = living.lab["kube-apiserver"]
    assert isinstance(server, KubeApiserver)
    return server


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


# --- without a running lab ---------------------------------------------------------------------------------


def test_kueue_webhooks_point_at_loopback_for_its_own_kinds_and_jobs_only() -> None:
    configs = {c["kind"]: c for c in webhook_configurations(8443, b"CA")}
    assert set(configs) == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    hooks = [h for c in configs.values() for h in c["webhooks"]]
    urls = {h["clientConfig"]["url"] for h in hooks}
    assert "https://127.0.0.1:8443/mutate-batch-v1-job" in urls
    assert "https://127.0.0.1:8443/validate-kueue-x-k8s-io-v1beta2-clusterqueue" in urls
    assert not any("pod" in u or "jobset" in u or "deployment" in u for u in urls)  # integrations left off
    assert all(h["clientConfig"]["caBundle"] == "Q0E=" and h["failurePolicy"] == "Fail" for h in hooks)


def test_kueue_metrics_certificate_needs_root_to_be_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(SourceError, match="only root can create it"):
        ensure_metrics_certs(tmp_path / "certs")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    ensure_metrics_certs(tmp_path / "certs")
    assert (tmp_path / "certs" / "tls.crt").is_file() and (tmp_path / "certs" / "tls.key").stat().st_mode & 0o077 == 0
