"""manifests/: the Kustomize base and overlays and the Helm chart, rendered by the real tools, kept equal to
each other, applied to a real kube-apiserver, and the backup CronJobs' command lines run with the pods'
credentials. What the backup identity is refused: tests/plugins/test_rbac.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.components.minio import MinioServer

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.metrics import BackupMetrics
from drtool.repo.repository import Repository
from drtool.scheduler.sets import parse_backup_sets
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab
from tests.fixtures.manifests import (
    BACKUP_SA,
    MANIFESTS,
    Doc,
    apply,
    drtool_config,
    helm_template,
    kubectl,
    kustomize,
    one,
    parse,
    pod_spec,
    render,
    service_account_kubeconfig,
)
from tests.store import test_immutability

# its fixtures: a bucket with Object Lock, and real MinIO users with the write-only and the prune policies
locked_bucket = test_immutability.locked_bucket
restricted_users = test_immutability.restricted_users

REPO = MANIFESTS.parent
BACKUP_CRONJOBS = ("drtool-backup-cluster", "drtool-backup-etcd")
PLACEHOLDER_NETS = ("192.0.2.", "198.51.100.")  # RFC 5737 documentation addresses in the base


def cronjobs(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "CronJob"}


def container(cronjob: Doc) -> Doc:
    [only] = pod_spec(cronjob)["containers"]
    return only


def secret_volumes(cronjob: Doc) -> set[str]:
    return {v["name"] for v in pod_spec(cronjob)["volumes"] if "secret" in v}


def assert_hardened(cronjob: Doc) -> None:
    """Non-root, read-only root, no escalation, limits, secrets only as read-only files: every drtool pod."""
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    spec, main = pod_spec(cronjob), container(cronjob)
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 65532
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert main["resources"]["requests"] and main["resources"]["limits"]
    # secrets only as mounted files, never as environment variables (which `env` or a crash dump would print)
    assert not any("valueFrom" in e for e in main.get("env", []))
    mounted = {m["name"] for m in main["volumeMounts"] if m.get("readOnly")}
    assert secret_volumes(cronjob) <= mounted


# --- rendered content -------------------------------------------------------------------------------


def test_backup_cronjobs_are_locked_down_and_only_back_up() -> None:
    docs = render("overlays/production")
    jobs = cronjobs(docs)
    assert sorted(jobs) == sorted(BACKUP_CRONJOBS)
    sets = parse_backup_sets(drtool_config(docs)["backup_sets"], "configmap")
    for name, job in jobs.items():
        assert job["metadata"]["namespace"] == "drtool"
        assert_hardened(job)
        main = container(job)
        assert main["image"] == "registry.example.net/platform/drtool:0.1.0"  # the overlay's `images:` landed
        assert main["args"][:2] == ["schedule", "run-once"] and "--no-prune" in main["args"], main["args"]
        assert main["args"][2] in sets and sets[main["args"][2]].rpo is not None, name
        env = {e["name"]: e["value"] for e in main["env"]}
        assert env["AWS_ENDPOINT_URL"] == "https://s3.dr-site.example.net"  # the overlay's patch landed
    # the API set holds a read-only token and no etcd certificate; the etcd set the reverse
    api, etcd = pod_spec(jobs["drtool-backup-cluster"]), pod_spec(jobs["drtool-backup-etcd"])
    assert api["serviceAccountName"] == "drtool-backup" and api.get("automountServiceAccountToken", True)
    assert secret_volumes(jobs["drtool-backup-cluster"]) == {"key", "store"}
    assert etcd["serviceAccountName"] == "drtool-etcd" and etcd["automountServiceAccountToken"] is False
    assert secret_volumes(jobs["drtool-backup-etcd"]) == {"key", "store", "etcd"}
    assert one(docs, "ServiceAccount", "drtool-etcd")["automountServiceAccountToken"] is False
    assert sets["cluster"].plugins == ["kubernetes"] and sets["etcd"].plugins == ["etcd"]


def test_cronjobs_run_the_image_the_containerfile_builds() -> None:
    """`image: drtool` until an overlay names the pushed image; the pods' uid is the image's USER."""
    assert {container(j)["image"] for j in cronjobs(render("base")).values()} == {"drtool"}
    user = re.search(r"^USER (\d+):(\d+)$", (REPO / "Containerfile").read_text(), re.MULTILINE)
    assert user is not None
    spec = pod_spec(cronjobs(render("base"))["drtool-backup-cluster"])["securityContext"]
    assert (str(spec["runAsUser"]), str(spec["runAsGroup"])) == user.groups()


def test_backup_role_is_read_only_and_restore_is_separate() -> None:
    docs = render("overlays/production")
    backup = one(docs, "ClusterRole", "drtool-backup")
    assert {v for rule in backup["rules"] for v in rule["verbs"]} <= {"get", "list"}
    for rule in backup["rules"]:
        resources = rule.get("resources", [])
        assert not any("/" in r for r in resources), rule  # no subresource is granted
        assert "*" not in rule.get("apiGroups", []), rule
        assert resources != ["*"] or "" not in rule["apiGroups"], rule  # `*` only inside named CRD groups
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == ["drtool-backup"]  # restore is not bound by default
    restore_docs = render("overlays/restore")
    bound = {b["roleRef"]["name"]: b["subjects"] for b in restore_docs if b["kind"] == "ClusterRoleBinding"}
    assert bound["drtool-restore"] == [{"kind": "ServiceAccount", "name": "drtool-restore", "namespace": "drtool"}]


def test_network_policies_are_egress_only_to_declared_peers() -> None:
    docs = render("overlays/production")
    expected_ports = {"drtool-backup": {53, 6443, 443, 9091}, "drtool-backup-etcd": {53, 2379, 443, 9091}}
    pods = {j["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
            for j in cronjobs(docs).values()}  # fmt: skip
    for name, ports in expected_ports.items():
        policy = one(docs, "NetworkPolicy", name)
        assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"} and policy["spec"]["ingress"] == []
        assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] in pods
        assert {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]} == ports, name
        cidrs = [peer["ipBlock"]["cidr"] for r in policy["spec"]["egress"] for peer in r["to"] if "ipBlock" in peer]
        assert "0.0.0.0/0" not in cidrs and not [c for c in cidrs if c.startswith(PLACEHOLDER_NETS)], cidrs
    assert "192.0.2." not in json.dumps(drtool_config(docs))  # the config's etcd members are the overlay's too


def test_management_overlay_only_prunes_with_its_own_credentials() -> None:
    docs = render("overlays/management")
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")]
    [job] = cronjobs(docs).values()
    assert_hardened(job)
    spec, main = pod_spec(job), container(job)
    assert main["args"] == ["prune", "--json"]
    assert spec["automountServiceAccountToken"] is False  # prune needs no Kubernetes API
    secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {"drtool-prune-key", "drtool-store-prune"}  # not the cluster's backup credentials
    env = {e["name"]: e["value"] for e in main["env"]}
    assert "DRTOOL_KEYFILE" in env and "DRTOOL_PASSPHRASE_FILE" not in env  # its own key slot
    policy = one(docs, "NetworkPolicy", "drtool-prune")
    assert {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]} == {53, 443}
    # it prunes the sets the protected cluster backs up, each with a retention
    pruned = parse_backup_sets(drtool_config(docs, "drtool-prune-config")["backup_sets"], "management")
    backed_up = parse_backup_sets(drtool_config(render("overlays/production"))["backup_sets"], "production")
    assert pruned.keys() == backed_up.keys()
    assert all(not s.retention.is_empty() for s in pruned.values())
    assert all(s.retention.is_empty() for s in backed_up.values())


def test_alert_rules_and_dashboard_use_metrics_drtool_exports() -> None:
    exported = set()
    for family in BackupMetrics().registry.collect():
        exported |= {family.name, f"{family.name}_total"}
    rules = yaml.safe_load((MANIFESTS / "monitoring" / "alerts.yaml").read_text())
    alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    assert {"DrtoolRPOBreached", "DrtoolBackupsFailing", "DrtoolStoreNearlyFull"} <= alerts.keys()
    dashboard = json.loads((MANIFESTS / "monitoring" / "grafana-dashboard.json").read_text())
    exprs = [*alerts.values(), *(t["expr"] for p in dashboard["panels"] for t in p["targets"])]
    used = {m for e in exprs for m in re.findall(r"\b(drtool_[a-z_]+)", e)}
    assert used and used <= exported, used - exported


# --- the Helm chart: the same objects as the Kustomize base -------------------------------------------


def comparable(docs: list[Doc]) -> dict[tuple[str, str], Any]:
    """(kind, name) -> the object without what legitimately differs: the labels Helm and Kustomize add, the
    image reference (base: `drtool`, chart: with its appVersion), config.yaml's formatting (compared parsed)."""
    out: dict[tuple[str, str], Any] = {}
    for doc in docs:
        body = {k: v for k, v in doc.items() if k not in ("metadata", "apiVersion")}
        if doc["kind"] == "ConfigMap":
            body["data"] = {k: yaml.safe_load(v) for k, v in body["data"].items()}
        if doc["kind"] == "CronJob":
            for main in pod_spec(body)["containers"]:
                main.pop("image"), main.pop("imagePullPolicy", None)
        if doc["kind"] != "Namespace":  # the chart leaves it to `helm install --create-namespace` by default
            out[(doc["kind"], doc["metadata"]["name"])] = body
    return out


@pytest.mark.e2e  # the Helm CLI is a Go build (minutes, once)
@pytest.mark.parametrize(
    ("overlay", "values", "namespace"),
    [("base", (), "drtool"), ("overlays/management", ("values-management.yaml",), "drtool-prune")],
)
def test_helm_chart_renders_what_kustomize_does(overlay: str, values: tuple[str, ...], namespace: str) -> None:
    """No drift: the same RBAC rules, CronJobs, ServiceAccounts, NetworkPolicies and drtool config."""
    chart = comparable(parse(helm_template(*values, namespace=namespace)))
    kustomized = comparable(render(overlay))
    assert sorted(chart) == sorted(kustomized)
    for key, body in kustomized.items():
        assert chart[key] == body, key


# --- on a real API server -----------------------------------------------------------------------------


@pytest.fixture
def applied(kube_target: KubeLab) -> KubeLab:
    """Every rendering dry-run on the server, then the production overlay applied for real (server-side)."""
    for namespace in ("drtool", "drtool-prune"):  # a dry run creates nothing, so the namespaced objects need them
        assert kubectl("create", "namespace", namespace, kubeconfig=kube_target.kubeconfig).returncode == 0
    for overlay in ("overlays/production", "overlays/restore", "base", "overlays/management"):
        assert "(server dry run)" in apply(kube_target, kustomize(overlay), "--dry-run=server"), overlay
    apply(kube_target, kustomize("overlays/production"), "--server-side", "--field-manager=drtool-test")
    return kube_target


def test_helm_chart_applies_server_side(kube_target: KubeLab) -> None:
    """`helm template` output applied with server-side apply; the server keeps the role as rendered."""
    assert kubectl("create", "namespace", "drtool", kubeconfig=kube_target.kubeconfig).returncode == 0
    rendered = helm_template()
    out = apply(kube_target, rendered, "--server-side", "--field-manager=helm")
    assert "cronjob.batch/drtool-backup-etcd serverside-applied" in out, out
    management = helm_template("values-management.yaml", release="drtool-prune", namespace="drtool-prune")
    assert kubectl("create", "namespace", "drtool-prune", kubeconfig=kube_target.kubeconfig).returncode == 0
    apply(kube_target, management, "--server-side", "--field-manager=helm")
    got = kubectl("get", "clusterrole", "drtool-backup", "-o", "json", kubeconfig=kube_target.kubeconfig)
    live = json.loads(got.stdout)
    assert live["rules"] == one(parse(rendered), "ClusterRole", "drtool-backup")["rules"]
    jobs = kubectl("-n", "drtool-prune", "get", "cronjobs", "-o", "name", kubeconfig=kube_target.kubeconfig)
    assert jobs.stdout.split() == ["cronjob.batch/drtool-prune"]


def pod_env(cronjob: Doc, files: dict[str, Path], **extra: str) -> dict[str, str]:
    """The container's environment as the pod has it, each path under a volume's mountPath moved to the
    folder ``files`` gives that volume on this machine (nothing else of this process's environment)."""
    main = container(cronjob)
    mounts = {m["mountPath"]: files[m["name"]] for m in main["volumeMounts"] if m["name"] in files}
    env = {"PATH": "/usr/bin:/bin"}
    for var in main["env"]:
        value = var["value"]
        for mount, local in mounts.items():
            if value == mount or value.startswith(mount + "/"):
                value = str(local) + value[len(mount) :]
        env[var["name"]] = value
    return env | extra


def run_pod(cronjob: Doc, env: dict[str, str]) -> dict[str, Any]:
    """The CronJob's own args (minus the Pushgateway, which the lab lacks), with ``--json``."""
    args = container(cronjob)["args"]
    if "--pushgateway" in args:
        at = args.index("--pushgateway")
        args = args[:at] + args[at + 2 :]
    args = args if "--json" in args else [*args, "--json"]
    proc = subprocess.run([sys.executable, "-m", "drtool", *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def pod_files(tmp_path: Path, name: str, config: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, Path]:
    """Folders standing in for one pod's volumes: its config, its Secrets' files, and its emptyDirs."""
    files = {"config": tmp_path / name / "config", "work": tmp_path / name / "work"}
    files["config"].mkdir(parents=True)
    files["work"].mkdir()
    (files["config"] / "config.yaml").write_text(yaml.safe_dump(config))
    for volume, contents in secrets.items():
        files[volume] = tmp_path / name / volume
        files[volume].mkdir()
        for filename, text in contents.items():
            (files[volume] / filename).write_text(text)
    return files


def aws_credentials(user: dict[str, str]) -> str:
    """An AWS shared credentials file (what the store Secret holds) for one MinIO user."""
    keys = f"aws_access_key_id = {user['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = {user['AWS_SECRET_ACCESS_KEY']}"
    return f"[default]\n{keys}\n"


@pytest.mark.minio
def test_cluster_backs_up_with_write_only_keys_and_management_prunes(
    applied: KubeLab,
    tmp_path: Path,
    minio: MinioServer,
    locked_bucket: str,
    restricted_users: dict[str, dict[str, str]],
) -> None:
    """Both backup CronJobs with their pods' credentials (a real ServiceAccount token, the etcd client,
    write-only MinIO keys: the policy of docs/kubernetes-deployment.md), then the management overlay's prune
    with its own keys and key slot. The store has Object Lock, as recommended: prune decides, keeps what is
    locked, and loses nothing."""
    admin = applied.kubeconfig
    assert kubectl("create", "namespace", "app", kubeconfig=admin).returncode == 0
    made = kubectl("-n", "app", "create", "secret", "generic", "db", "--from-literal=password=s3cr3t", kubeconfig=admin)
    assert made.returncode == 0, made.stderr
    sa_config = service_account_kubeconfig(applied, tmp_path / "sa-kubeconfig")
    s3 = {"AWS_ENDPOINT_URL": minio.api_url, "AWS_DEFAULT_REGION": minio.env()["AWS_DEFAULT_REGION"]}
    store = f"s3://{locked_bucket}/{test_immutability.PREFIX}"

    # the store owner creates the store and a key-file slot for the prune job
    owner = {**restricted_users["backup"], "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    owner["DRTOOL_PASSPHRASE"] = PASSPHRASE
    prune_key, cluster_key = tmp_path / "prune.key", tmp_path / "cluster.key"
    for args in (
        ["init", "--store", store, "--keyfile", str(cluster_key)],
        ["key", "add", "--keyfile", str(prune_key)],
    ):
        proc = subprocess.run([sys.executable, "-m", "drtool", *args], env=owner, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr

    # the protected cluster: the jobs' own config with this lab's addresses, the backup user's keys
    docs = render("overlays/production")
    config = drtool_config(docs) | {"store": store}
    config["sources"] = {"kubernetes": {"kubeconfig": sa_config}, "etcd": {"endpoints": applied.etcd.client_url}}
    secrets = {
        "key": {"keyfile": cluster_key.read_text()},
        "store": {"credentials": aws_credentials(restricted_users["backup"])},
    }
    expect = {"DRTOOL_EXPECT_KEY_CHECK": cluster_key.read_text().split()[-1], "DRTOOL_EXPECT_KEY_GENERATION": "0"}
    results = {}
    for name in ("drtool-backup-cluster", "drtool-backup-cluster", "drtool-backup-etcd"):
        job = cronjobs(docs)[name]
        files = pod_files(tmp_path / f"{name}-{len(results)}", name, config, secrets)
        result = run_pod(job, pod_env(job, files, **s3, **expect))  # the key the overlay's store-key.yaml names
        assert result["status"] == "ok" and result["prune"] is None and not result["prune_note"], result
        results[f"{name}-{len(results)}"] = result["backup_id"]
    first, second, snapshot = results.values()

    repo = Repository.open(open_backend(store), Credentials(passphrase=PASSPHRASE))
    manifest = repo.get_manifest(second)
    assert {p: o.status for p, o in manifest.plugins.items()} == {"kubernetes": "ok"}
    resources = manifest.plugins["kubernetes"].meta["resources"]
    assert any(key.startswith("secrets") for key in resources), sorted(resources)  # Secrets readable as the SA
    assert "forbidden" not in json.dumps(manifest.plugins["kubernetes"].meta).lower()
    assert {p: o.status for p, o in repo.get_manifest(snapshot).plugins.items()} == {"etcd": "ok"}

    # ... and its token cannot write: a real write is refused, and so is one through impersonation
    refused = kubectl("-n", "app", "create", "configmap", "x", "--from-literal=a=b", kubeconfig=sa_config)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
    delete = kubectl("-n", "app", "delete", "secret", "db", kubeconfig=sa_config)
    assert delete.returncode != 0 and "forbidden" in delete.stderr.lower()
    for verb, expected in (("list", "yes"), ("watch", "no"), ("create", "no"), ("patch", "no"), ("delete", "no")):
        can = kubectl("auth", "can-i", verb, "secrets", "-A", "--as", BACKUP_SA, kubeconfig=admin)
        assert can.stdout.strip() == expected, (verb, can.stdout, can.stderr)

    # the management cluster: its own config (same sets, with retention), prune keys, its key-file slot
    management = render("overlays/management")
    [prune_job] = cronjobs(management).values()
    prune_config = drtool_config(management, "drtool-prune-config") | {"store": store}
    prune_secrets = {"key": {"keyfile": prune_key.read_text()},
                     "store": {"credentials": aws_credentials(restricted_users["prune"])}}  # fmt: skip
    files = pod_files(tmp_path / "prune", "prune", prune_config, prune_secrets)
    report = run_pod(prune_job, pod_env(prune_job, files, **s3))
    decisions = {d["id"]: d["keep"] for ds in report["decisions"].values() for d in ds}
    hours = {b: repo.get_manifest(b).finished[:13] for b in (first, second)}  # ISO, to the hour (UTC)
    first_kept = hours[first] != hours[second]  # the two finished either side of an hour's end: each its hour's newest
    assert decisions == {first: first_kept, second: True, snapshot: True}  # keep_hourly: the newest of the hour
    assert report["forgotten"] == [] and (first_kept or any(first in name for name in report["locked_objects"]))
    assert sorted(repo.backup_ids()) == sorted([first, second, snapshot])  # Object Lock: nothing lost
