"""The lab's Kubernetes control plane: a real kube-apiserver on a real etcd, its kubeconfigs, and the seed.

Everything is read back with the official ``kubernetes`` client from the kubeconfig files the lab wrote,
so these tests check what any Kubernetes client would see, not what drtool's own HTTP code believes.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from cryptography import x509
from drtool_lab import gomods, kube_seed, upstream
from drtool_lab.build import KUBE_VERSION
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.kube_seed import SEED_LABEL, TEAMS, secret_value
from drtool_lab.lab import Lab
from kubernetes import client
from kubernetes.client.rest import ApiException

from drtool.errors import SourceError
from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.kube import SOURCE_OBJECTS, KubeLab, start_kube_lab

# --- the API server and its kubeconfigs -----------------------------------------------------------


def test_api_server_is_ready_and_reports_the_pinned_release(kube_source: KubeLab) -> None:
    api = kube_source.api_client()
    assert client.VersionApi(api).get_code().git_version == KUBE_VERSION
    with kube_source.apiserver.access().session() as session:
        assert session.get(f"{kube_source.apiserver.url}/readyz", timeout=10).text == "ok"
    assert kube_source.env()["KUBECONFIG"] == kube_source.kubeconfig
    assert kube_source.env()["DRTOOL_LAB_READONLY_KUBECONFIG"] == kube_source.readonly_kubeconfig
    assert Path(kube_source.kubeconfig).stat().st_mode & 0o077 == 0  # it names a private key


def test_admin_creates_a_deployment_and_a_pod_in_a_new_namespace(kube_target: KubeLab) -> None:
    api = kube_target.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": "fresh"}})
    labels = {"app": "web"}
    pod_spec = {"containers": [{"name": "web", "image": "nginx:1.27"}]}
    template = {"metadata": {"labels": labels}, "spec": pod_spec}
    deployment = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": labels}, "template": template}}
    apps.create_namespaced_deployment("fresh", deployment)
    # no controller-manager creates the `default` ServiceAccount: the lab runs without ServiceAccount admission
    core.create_namespaced_pod("fresh", {"metadata": {"name": "one-off"}, "spec": pod_spec})
    assert [p.metadata.name for p in core.list_namespaced_pod("fresh").items] == ["one-off"]
    review = client.AuthenticationV1Api(api).create_self_subject_review({})
    assert "system:masters" in review.status.user_info.groups


def test_the_api_server_stops_promptly_with_a_watch_open(kube_target: KubeLab) -> None:
    """SIGTERM ends open watches (a test's in-process follower, a controller): before, the server waited on them
    until ``process.stop`` killed it 15 s later, in every teardown of a lab a follower had watched."""
    client.CoreV1Api(kube_target.api_client()).create_namespaced_config_map("default", {"metadata": {"name": "w"}})
    watching = KubeClient(Connection.from_mapping({"kubeconfig": kube_target.kubeconfig}))
    events = watching.watch("/api/v1/namespaces/default/configmaps", {"timeoutSeconds": "300"}, read_timeout=300)
    assert next(events)["type"] == "ADDED"  # the watch is open and stays so
    started = time.monotonic()
    kube_target.apiserver.stop()
    assert not kube_target.apiserver.running() and time.monotonic() - started < 10
    events.close()


def test_readonly_kubeconfig_reads_everything_and_writes_nothing(kube_source: KubeLab) -> None:
    ro = kube_source.api_client(readonly=True)
    core = client.CoreV1Api(ro)
    assert len(core.list_secret_for_all_namespaces(label_selector=SEED_LABEL).items) > 0
    queues = client.CustomObjectsApi(ro).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
    assert {f"cq-{t.short}" for t in TEAMS} <= {q["metadata"]["name"] for q in queues["items"]}
    crds = client.ApiextensionsV1Api(ro).list_custom_resource_definition().items
    assert len(crds) >= 35
    for write in (
        lambda: core.create_namespaced_config_map("team-nlp", {"metadata": {"name": "nope"}}),
        lambda: core.delete_namespaced_secret("hf-token", "team-nlp"),
        lambda: core.patch_namespace("team-nlp", {"metadata": {"labels": {"x": "y"}}}),
    ):
        with pytest.raises(ApiException) as denied:
            write()
        assert denied.value.status == 403
    review = client.AuthenticationV1Api(ro).create_self_subject_review({})
    assert review.status.user_info.username == "drtool-readonly"


def test_two_labs_side_by_side_are_separate_clusters(kube_source: KubeLab, kube_target: KubeLab) -> None:
    assert kube_source.apiserver.secure_port != kube_target.apiserver.secure_port
    assert kube_source.etcd.client_url != kube_target.etcd.client_url
    assert kube_target.apiserver.etcd_servers == kube_target.etcd.client_url
    client.CoreV1Api(kube_target.api_client()).create_namespace({"metadata": {"name": "only-in-target"}})
    source_ns = {n.metadata.name for n in client.CoreV1Api(kube_source.api_client()).list_namespace().items}
    assert "team-nlp" in source_ns and "only-in-target" not in source_ns
    target_ns = {n.metadata.name for n in client.CoreV1Api(kube_target.api_client()).list_namespace().items}
    assert "team-nlp" not in target_ns
    # each lab has its own CA: the source's admin certificate means nothing to the target
    src, tgt = kube_source.apiserver.access(), kube_target.apiserver.access()
    with requests.Session() as session:
        session.trust_env = False
        resp = session.get(f"{tgt.url}/api/v1/namespaces", cert=(src.cert, src.key), verify=tgt.ca, timeout=10)
    assert resp.status_code == 401


def test_api_server_on_an_etcd_with_mutual_tls(lab_root: Path) -> None:
    kube = start_kube_lab(lab_root, "kube-etcd-tls", etcd_tls=True)
    try:
        assert kube.apiserver.etcd_servers.startswith("https://")
        assert f"--etcd-certfile={kube.etcd.client_cert.cert}" in kube.apiserver.argv()
        client.CoreV1Api(kube.api_client()).create_namespace({"metadata": {"name": "over-tls"}})
    finally:
        kube.lab.down()
    assert not kube.apiserver.running() and not kube.etcd.running()  # stopped wave by wave, the API server first


def test_down_adds_nothing_to_a_lab_missing_what_a_component_requires(lab_root: Path) -> None:
    lab = Lab("kube-half", root=lab_root)
    lab.add("kube-apiserver")  # its etcd was never added: stopping must not add (or start) one
    lab.down(purge=False)
    assert list(lab.components) == ["kube-apiserver"]
    assert list(Lab.load("kube-half", lab_root).components) == ["kube-apiserver"]


def test_a_server_that_cannot_start_fails_at_once_and_is_not_left_running(lab_root: Path) -> None:
    lab = Lab("kube-broken", root=lab_root)
    server = lab.add("kube-apiserver", service_cluster_ip_range="10.0.0.0/1")  # refused by the server
    assert isinstance(server, KubeApiserver)
    started = time.monotonic()
    try:
        with pytest.raises(SourceError, match="exited while starting") as failed:
            lab.up()
        assert time.monotonic() - started < 60
        assert "service cluster IP range" in (failed.value.hint or "")  # the server's own words
        assert not server.running()
    finally:
        lab.down()


def test_the_build_refuses_a_go_mod_that_disagrees_with_the_pin(tmp_path: Path) -> None:
    assert gomods.required_version("lab", "k8s.io/kubernetes") == KUBE_VERSION
    (tmp_path / "go.mod").write_text("module x\n\nrequire (\n\tk8s.io/kubernetes v1.36.0\n)\n")
    with pytest.raises(SourceError, match=r"pins v1\.36\.0"):
        gomods.check_kube_pin(tmp_path)
    assert f"-X k8s.io/component-base/version.gitVersion={KUBE_VERSION}" in gomods.kube_ldflags(KUBE_VERSION)
    assert "-X k8s.io/component-base/version.gitMinor=37" in gomods.kube_ldflags("v1.37.2")


# --- the seed -----------------------------------------------------------------------------------------


def test_seed_counts_match_what_the_api_serves(kube_source: KubeLab) -> None:
    seeded = kube_source.seeded
    assert seeded is not None
    assert seeded.total == SOURCE_OBJECTS and seeded.bulk > 0
    listed = kube_source.list_objects()
    found = Counter(kind for kind, ns, name in seeded.refs if (ns, name) in listed[kind])
    assert found == seeded.counts
    assert seeded.counts["CustomResourceDefinition"] == len(upstream.crds()) == 35
    for crd in listed["CustomResourceDefinition"].values():
        assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
    kinds = set(seeded.counts)
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"} <= kinds
    assert {"AdmissionCheck", "JobSet", "TrainJob", "Secret", "ConfigMap", "Deployment", "RoleBinding"} <= kinds
    assert {"LeaderWorkerSet", "PyTorchJob", "InferenceService", "BackupStorageLocation", "Certificate"} <= kinds


def test_seed_content_is_realistic(kube_source: KubeLab) -> None:
    listed = kube_source.list_objects()
    secret = listed["Secret"][("team-nlp", "s3-credentials")]
    value = base64.b64decode(secret["data"]["AWS_SECRET_ACCESS_KEY"]).decode()
    assert value == secret_value("team-nlp", "s3-credentials", "AWS_SECRET_ACCESS_KEY")
    tls = listed["Secret"][("team-vision", "vision-tls")]
    assert tls["type"] == "kubernetes.io/tls"
    x509.load_pem_x509_certificate(base64.b64decode(tls["data"]["tls.crt"]))
    # Kueue: GPU flavors with node labels and taints, a cohort hierarchy, quotas with borrowing/lending
    h100 = listed["ResourceFlavor"][("", "h100")]["spec"]
    assert h100["nodeTaints"][0]["key"] == "nvidia.com/gpu" and h100["topologyName"] == "gpu-topology"
    parents = {name: c.get("spec", {}).get("parentName") for (_, name), c in listed["Cohort"].items()}
    assert parents["exploration"] == "training" and parents["training"] == "ai-platform"
    cq = listed["ClusterQueue"][("", "cq-nlp")]
    gpu = cq["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]
    assert (gpu["nominalQuota"], gpu["borrowingLimit"], gpu["lendingLimit"]) == (16, 8, 4)
    assert cq["spec"]["preemption"]["borrowWithinCohort"]["policy"] == "LowerPriority"
    assert cq["status"]["conditions"][0]["type"] == "Active"  # written through /status
    for team in TEAMS:
        assert listed["LocalQueue"][(team.namespace, team.local_queue)]["spec"]["clusterQueue"] == team.cluster_queue
    # owner chains carry the owners' real UIDs: Deployment -> ConfigMap -> Secret, TrainJob -> JobSet
    deployment = listed["Deployment"][("team-nlp", "model-server")]
    configmap = listed["ConfigMap"][("team-nlp", "model-server-config")]
    creds = listed["Secret"][("team-nlp", "model-server-credentials")]
    assert configmap["metadata"]["ownerReferences"][0]["uid"] == deployment["metadata"]["uid"]
    assert creds["metadata"]["ownerReferences"][0]["uid"] == configmap["metadata"]["uid"]
    trainjob = listed["TrainJob"][("team-nlp", "nlp-pretrain")]
    jobset = listed["JobSet"][("team-nlp", "nlp-pretrain")]
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
    assert trainjob["status"]["conditions"][0]["type"] == "Suspended"
    gateway = listed["Service"][("team-speech", "inference-gateway")]
    assert gateway["status"]["loadBalancer"]["ingress"][0]["ip"] == "203.0.113.10"
    # upstream samples, as-is
    assert ("default", "leaderworkerset-sample") in listed["LeaderWorkerSet"]
    assert ("velero", "default") in listed["BackupStorageLocation"]


def test_seeding_again_changes_nothing(kube_source: KubeLab) -> None:
    assert kube_source.seeded is not None
    again = kube_seed.seed(kube_source.apiserver.access(), SOURCE_OBJECTS)
    assert again.created == 0 and again.counts == kube_source.seeded.counts


@pytest.mark.e2e  # Go's module cache, which the lab build fills
def test_crds_come_from_the_pinned_modules_without_network_once_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    upstream.module_zip.cache_clear()
    monkeypatch.setenv("GOPROXY", "off")  # Go answers from its module cache, or fails
    groups = Counter(d["spec"]["group"] for d in upstream.crds())
    assert groups["kueue.x-k8s.io"] == 11 and groups["velero.io"] == 11 and groups["cert-manager.io"] == 4
    assert {"jobset.x-k8s.io", "leaderworkerset.x-k8s.io", "trainer.kubeflow.org", "serving.kserve.io"} <= set(groups)
    # the zip's hash is checked against the pin
    monkeypatch.setitem(upstream.MODULES, "lws", dataclasses.replace(upstream.MODULES["lws"], h1="h1:tampered="))
    upstream.module_zip.cache_clear()
    with pytest.raises(SourceError, match="but it is pinned at h1:tampered="):
        upstream.module_zip("lws")
    # a version that is neither cached nor reachable fails with the reason, not a traceback
    monkeypatch.setitem(upstream.MODULES, "lws", dataclasses.replace(upstream.MODULES["lws"], version="v0.0.1"))
    with pytest.raises(SourceError, match=r"cannot download sigs\.k8s\.io/lws@v0\.0\.1"):
        upstream.module_zip("lws")
    upstream.module_zip.cache_clear()


# --- the command line ---------------------------------------------------------------------------------


@pytest.mark.e2e  # `drtool lab up --bare` starts kube-apiserver
def test_cli_up_env_seed_status_down(cli: Cli, tmp_path: Path) -> None:
    cli.env["DRTOOL_LAB_DIR"] = str(tmp_path / "labs")
    assert_clean_error(cli("lab", "up", "--name", "kubecli", "--bare", "--with", "etcd"), 2, "--bare and --with")
    cli("lab", "up", "--name", "kubecli", "--bare", check=True)
    try:
        out = cli("lab", "env", "kubecli", check=True).stdout
        env = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())
        assert {"ETCD_ENDPOINTS", "KUBECONFIG", "DRTOOL_LAB_READONLY_KUBECONFIG"} <= env.keys()
        from kubernetes import config

        api = config.new_client_from_config(config_file=env["KUBECONFIG"])
        assert "kube-system" in {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
        seeded = cli("lab", "seed", "kubecli", "--objects", "300", check=True).stdout
        assert "300 objects (300 created" in seeded and "ClusterQueue" in seeded
        status = cli("lab", "status", check=True).stdout
        assert "kube-apiserver" in status and "up" in status
        offline = {"GOPROXY": "off", "GOMODCACHE": str(tmp_path / "empty-module-cache")}
        assert_clean_error(cli("lab", "seed", "kubecli", "--objects", "10", env=offline), 7, "cannot download")
    finally:
        cli("lab", "down", "kubecli", check=True)
    assert_clean_error(cli("lab", "seed", "kubecli"), 6, "no lab named")
