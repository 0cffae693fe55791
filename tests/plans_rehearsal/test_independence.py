"""Recovery independence against a real backup of a real lab kube-apiserver.

The module starts its own small control plane (the shared ``kube_source`` is read-only) and writes into
it what a platform that depends on itself looks like: workloads pulling from an in-cluster registry (by
its Service name and by its ClusterIP), a Vault inside the cluster, an admission webhook served by an
in-cluster Service, a node-local StorageClass, an Argo CD Application syncing from an in-cluster git
server, CoreDNS forwarding to an in-cluster resolver; and, beside them, dependencies that are independent
(an IP outside the cluster's networks, a cloud provisioner) and one that cannot be judged (a short name).
It is backed up with the kubernetes plugin, then the analysis and `drtool verify-independence` judge it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.kube_seed import KubeClient, wait_established
from drtool_plugins.kubernetes import KubernetesPlugin

from drtool.backends.local import LocalBackend
from drtool.crypto.slots import KeySlot
from drtool.independence.analysis import (
    Finding,
    IndependenceReport,
    _judge_resolved,
    _remediate_repointed_names,
    analyze,
    resolve_names,
)
from drtool.independence.domain import Address, DomainMatch, FailureDomain
from drtool.independence.remedies import CUTOVER_PURPOSE, Remedy
from drtool.kube.references import dns_forwarders, references
from drtool.plans.schema import Plan
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.servers.process import free_port
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.kube import KubeLab, start_kube_lab

REGISTRY_IP = "10.96.100.100"  # the in-cluster registry's ClusterIP, inside the lab's 10.96.0.0/16
VAULT = "http://vault.vault.svc.cluster.local:8200"
GIT = "https://gitea.gitea.svc.cluster.local/platform/apps.git"
TRANSIT_VAULT = "https://vault.vault.svc:8200"


def crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A minimal CRD (any spec), standing in for the upstream Argo CD / Flux CRDs the fixtures lack."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def platform_objects() -> list[dict[str, Any]]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "trainer",
            "namespace": "ml",
            "annotations": {"vault.hashicorp.com/address": VAULT},
        },
        "spec": {
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.infra.svc:5000/ml/trainer:1",
                            "env": [  # what no plugin reads: the reference finder's
                                {"name": "VAULT_ADDR", "value": "http://vault.secrets.svc.cluster.local:8200"},
                                {"name": "CHECKPOINTS", "value": "s3://ckpt/llm?endpoint=http://10.96.30.30:9000"},
                            ],
                        },
                        {"name": "sidecar", "image": f"{REGISTRY_IP}:5000/ml/sidecar:1"},
                        {"name": "tools", "image": "mirror:5000/ml/tools:1"},
                        {"name": "base", "image": "192.0.2.10:5000/ml/base:1"},
                    ]
                },
            },
        },
    }
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policy"},
        "webhooks": [
            {
                "name": "check.policy.example.com",
                "clientConfig": {"service": {"name": "policy-webhook", "namespace": "policy", "port": 443}},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": ["drtool.test"],
                        "apiVersions": ["v1"],
                        "resources": ["nothings"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    corefile = ".:53 {\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . 10.96.0.20 192.0.2.53\n}\n"
    return [
        namespace("ml"),
        namespace("infra"),
        namespace("argocd"),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "registry", "namespace": "infra"},
            "spec": {"clusterIP": REGISTRY_IP, "selector": {"app": "registry"}, "ports": [{"port": 5000}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"}, "ports": [{"port": 53}]},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": corefile},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "trainer-config", "namespace": "ml"},
            "data": {
                "app.yaml": "# tracking: http://old-mlflow.ml.svc:5000\ntracking_uri: http://mlflow.ml.svc:5000\n"
            },
        },
        deployment,
        webhook,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local-path"},
            "provisioner": "rancher.io/local-path",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
        },
        {
            "apiVersion": "argoproj.io/v1",
            "kind": "Application",
            "metadata": {"name": "platform", "namespace": "argocd"},
            "spec": {"source": {"repoURL": GIT, "path": "apps"}, "destination": {"namespace": "ml"}},
        },
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "infra", "namespace": "argocd"},
            "spec": {"url": "https://192.0.2.30/platform/infra.git", "interval": "1m"},
        },
    ]


@dataclasses.dataclass
class Backed:
    lab: KubeLab
    repo: Repository
    manifest: Manifest
    store: Path
    target_kubeconfig: Path


@pytest.fixture(scope="module")
def backed(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backed]:
    """A lab that depends on itself, backed up once (with a Vault-transit key slot record in the store)."""
    kube = start_kube_lab(lab_root, "indep-src")
    try:
        client = KubeClient(kube.apiserver.access())
        crds = [
            crd("argoproj.io", "Application", "applications"),
            crd("source.toolkit.fluxcd.io", "GitRepository", "gitrepositories"),
        ]
        for obj in crds:
            client.create(obj)
        wait_established(client, [c["metadata"]["name"] for c in crds])
        for obj in platform_objects():
            client.create(obj)
        store = tmp_path_factory.mktemp("indep") / "store"
        repo = Repository.init(LocalBackend(store), passphrase=PASSPHRASE)
        # drtool has no Vault transit slot yet; its record is what the analysis reads (kind, holder address)
        transit = {"name": "vault-transit", "address": TRANSIT_VAULT, "key": "drtool"}
        repo.add_slot(KeySlot("7ea25175", "vault-transit", "vault transit", "2026-11-29T00:00:00Z", transit, ""))
        with BackupSession(repo) as session:
            outcome = session.run_plugin(KubernetesPlugin(), {"kubeconfig": kube.kubeconfig})
            assert outcome.status == "ok", outcome.error
            manifest = session.commit()
        # the target: a kubeconfig for another API server (it is only read, never contacted, by the analysis)
        config = yaml.safe_load(Path(kube.kubeconfig).read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
        target = store.parent / "target.kubeconfig"
        target.write_text(yaml.safe_dump(config))
        yield Backed(kube, repo, manifest, store, target)
    finally:
        kube.lab.down()


def make_plan(waivers: list[dict[str, Any]] | None = None) -> Plan:
    return Plan.model_validate(
        {"name": "indep", "steps": [{"id": "cluster", "uses": "kubernetes"}], "waivers": waivers or []}
    )


WAIVERS = [
    {"match": f"{REGISTRY_IP}:*", "reason": "sidecar images are rebuilt by CI on restore"},
    {"match": "registry.infra.svc*", "reason": "accepted last year", "expires": "2020-01-01"},
]


@pytest.fixture(scope="module")
def report(backed: Backed) -> IndependenceReport:
    targets = {"cluster": {"kubeconfig": str(backed.target_kubeconfig)}}
    return analyze(make_plan(WAIVERS), backed.repo, backed.manifest, targets, resolve=False)


def finding(report: IndependenceReport, address: str) -> Any:
    found = [f for f in report.findings if f.address == address]
    assert len(found) == 1, (address, [f.address for f in report.findings])
    return found[0]


# --- the failure domain -------------------------------------------------------------------------------


def test_failure_domain_recorded_at_backup_holds_the_clusters_networks_and_endpoints(backed: Backed) -> None:
    domain = FailureDomain.from_manifest(backed.manifest)
    facts = domain.facts
    assert facts["service_cidrs"] == ["10.96.0.0/16"]
    assert facts["cluster_dns_suffixes"] == ["cluster.local"]
    assert facts["cluster_dns_ips"] == ["10.96.0.10"]
    assert facts["kubernetes_api_endpoints"] == [backed.lab.apiserver.url]
    source = domain.match(backed.lab.apiserver.url)
    assert source is not None and source.part == "kubernetes_api_endpoints"
    # the lab's loopback host is shared with unrelated services: only the source's own port is inside
    host, port = backed.lab.apiserver.url.removeprefix("https://").rsplit(":", 1)
    assert domain.is_inside(host, int(port))
    assert domain.is_inside(host, free_port()) is None
    assert domain.match(f"{REGISTRY_IP}:5000").value == "10.96.0.0/16"  # type: ignore[union-attr]
    assert domain.match("192.0.2.10:5000") is None


DOMAIN = FailureDomain(
    {
        "kubernetes_api_endpoints": ["https://10.0.0.5:6443"],
        "node_addresses": ["10.0.0.5", "fd00::5"],
        "pod_cidrs": ["10.244.0.0/24"],
        "service_cidrs": ["10.96.0.0/16", "fd00:96::/108"],
        "cluster_dns_suffixes": ["corp.cluster"],
        "ingress_hosts": ["asr.ml.example.com", "*.apps.example.com"],
        "loadbalancer_addresses": ["203.0.113.10", "gw.lb.example.com"],
        "etcd_endpoints": ["https://127.0.0.1:2379"],
    },
    {"ingress_hosts": "Ingress team-speech/asr spec.rules"},
)


@pytest.mark.parametrize(
    ("address", "part", "value"),
    [
        ("https://10.0.0.5", "node_addresses", "10.0.0.5"),  # another port of a node: the same host
        ("10.0.0.5:6443", "kubernetes_api_endpoints", "https://10.0.0.5:6443"),
        ("[fd00::5]:10250", "node_addresses", "fd00::5"),
        ("fd00:96::a", "service_cidrs", "fd00:96::/108"),
        ("oci://10.244.0.17:5000/models", "pod_cidrs", "10.244.0.0/24"),
        ("vault.vault.svc.corp.cluster:8200", "cluster_dns_suffixes", "corp.cluster"),
        ("minio.storage.svc", "cluster_dns_suffixes", "*.svc"),
        ("ASR.ml.example.com.", "ingress_hosts", "asr.ml.example.com"),
        ("https://grafana.apps.example.com/d/x", "ingress_hosts", "*.apps.example.com"),
        ("gw.lb.example.com:443", "loadbalancer_addresses", "gw.lb.example.com"),
        ("127.0.0.1:2379", "etcd_endpoints", "https://127.0.0.1:2379"),
    ],
)
def test_domain_matches(address: str, part: str, value: str) -> None:
    found = DOMAIN.match(address)
    assert found is not None and (found.part, found.value) == (part, value), found


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:2380", "127.0.0.1", "localhost", "10.1.0.5", "apps.example.com", "ghcr.io", "/srv/store", "a b"],
)
def test_domain_does_not_match(address: str) -> None:
    assert DOMAIN.match(address) is None


def test_domain_match_evidence_for_the_network_guard() -> None:
    assert DOMAIN.is_inside("10.96.0.1", 443) == "10.96.0.1:443: inside network 10.96.0.0/16 in service_cidrs"
    reason = DOMAIN.is_inside("asr.ml.example.com", 443)
    assert reason is not None and "(Ingress team-speech/asr spec.rules)" in reason


def test_names_are_resolved_in_parallel_and_their_ips_judged() -> None:
    resolved = resolve_names(["localhost", "no-such-host.invalid"], timeout=5)
    assert "127.0.0.1" in (resolved["localhost"] or []) and resolved["no-such-host.invalid"] is None
    status, detail, found = _judge_resolved("localhost:2379", Address("localhost", 2379), resolved, DOMAIN)
    assert status == "inside" and found is not None and found.part == "etcd_endpoints", detail
    status, detail, _ = _judge_resolved("x.invalid", Address("no-such-host.invalid"), resolved, DOMAIN)
    assert status == "unknown" and "does not resolve" in detail


# --- each kind of judgement ---------------------------------------------------------------------------


def test_image_in_an_in_cluster_registry_is_inside_with_its_evidence(report: IndependenceReport) -> None:
    registry = finding(report, "registry.infra.svc:5000")
    assert registry.status == "inside"
    assert registry.needed and registry.steps == ["cluster"]
    assert "deployments.apps ml/trainer" in registry.evidence
    assert "image registry.infra.svc:5000/ml/trainer:1" in registry.evidence
    assert "*.svc" in registry.detail and "cluster_dns_suffixes" in registry.detail
    assert "registry outside the cluster" in registry.hint
    # the expired waiver that named it does not apply
    assert registry.waiver is None


def test_vault_and_gitops_remote_inside_the_cluster_dns_domain(report: IndependenceReport) -> None:
    vault = finding(report, VAULT)
    assert vault.status == "inside" and "annotation vault.hashicorp.com/address" in vault.evidence
    assert "cluster.local" in vault.detail and "Vault" in vault.hint
    git = finding(report, GIT)
    assert git.status == "inside" and "applications.argoproj.io argocd/platform spec.source.repoURL" in git.evidence
    assert "mirror the repository" in git.hint
    assert finding(report, "https://192.0.2.30/platform/infra.git").status == "independent"  # Flux, outside


def test_webhook_whose_service_will_not_exist_blocks_the_restore(report: IndependenceReport) -> None:
    hook = finding(report, "policy-webhook.policy.svc:443")
    assert hook.status == "inside" and hook.blocks_restore
    assert "will not exist yet" in hook.purpose
    assert report.counts()["blocking"] >= 1


def test_storage_provisioners_and_dns_forwarders(report: IndependenceReport) -> None:
    local = finding(report, "rancher.io/local-path")
    assert local.kind == "provisioner" and local.status == "inside" and "cluster's own nodes" in local.detail
    assert finding(report, "ebs.csi.aws.com").status == "independent"
    assert finding(report, "10.96.0.20").status == "inside"  # CoreDNS forwards to an in-cluster resolver
    assert finding(report, "192.0.2.53").status == "independent"


def test_the_finder_names_what_workloads_carry_in_env_and_embedded_files(report: IndependenceReport) -> None:
    """The issue's own case: a Vault address and an S3 endpoint in env vars, a tracking URI in a ConfigMap's
    YAML file — no plugin reads them; the finder does, with the field path and the line."""
    vault = finding(report, "http://vault.secrets.svc.cluster.local:8200")
    assert vault.status == "inside" and vault.found_by == ["finder"] and vault.field_kinds == ["env"]
    assert "deployments.apps ml/trainer spec.template.spec.containers[0].env[0].value" in vault.evidence
    s3 = finding(report, "http://10.96.30.30:9000")  # the bucket URL's endpoint, not the bucket
    assert s3.status == "inside" and "service_cidrs" in s3.detail and "containers[0].env[1].value" in s3.evidence
    tracking = finding(report, "http://mlflow.ml.svc:5000")
    assert tracking.status == "inside" and 'configmaps ml/trainer-config data["app.yaml"] line 2' in tracking.evidence
    assert not [f for f in report.findings if "old-mlflow" in f.address]  # a commented-out line is no reference
    corefile = finding(report, "10.96.0.20")  # CoreDNS's upstream: the plugin's and the finder's, one finding
    assert corefile.found_by == ["kubernetes", "finder"] and "data.Corefile line 3" in corefile.evidence
    assert report.finder["scanned"]["kubernetes"]["fields"] > 0


def test_waived_unknown_and_independent(report: IndependenceReport) -> None:
    waived = finding(report, f"{REGISTRY_IP}:5000")
    assert waived.status == "waived" and waived.waiver is not None
    assert waived.waiver.reason == "sidecar images are rebuilt by CI on restore"
    assert waived.match is not None and waived.match.part == "service_cidrs"  # the evidence stays
    assert finding(report, "mirror:5000").status == "unknown"  # a short name: only the cluster's DNS knows it
    assert finding(report, "192.0.2.10:5000").status == "independent"
    target = [f for f in report.findings if f.purpose.startswith("target Kubernetes API server")]
    assert [t.status for t in target] == ["independent"]
    store = [f for f in report.findings if f.purpose.startswith("drtool store")]
    assert [s.status for s in store] == ["independent"]
    waivers = {w["match"]: w for w in report.to_dict()["waivers"]}
    assert waivers[f"{REGISTRY_IP}:*"]["used"] == 1
    assert waivers["registry.infra.svc*"]["expired"] and waivers["registry.infra.svc*"]["used"] == 0


def test_key_slots_the_one_used_offline_and_a_vault_transit_slot_inside(report: IndependenceReport) -> None:
    slots = [f for f in report.findings if f.kind == "credential" and f.address.startswith("key slot ")]
    used = [f for f in slots if f.needed]
    assert len(used) == 1 and used[0].status == "independent" and "passphrase" in used[0].detail
    transit = finding(report, "key slot 7ea25175 (vault-transit)")
    assert transit.status == "inside" and not transit.needed
    assert TRANSIT_VAULT in transit.detail and "*.svc" in transit.detail
    assert "drtool key add" in transit.hint


def test_verdict_fails_only_on_needed_inside_findings(report: IndependenceReport, backed: Backed) -> None:
    assert report.verdict == "fail"
    data = report.to_dict()
    assert data["verdict"] == "fail" and data["counts"]["inside"] == len(
        [f for f in report.findings if f.status == "inside"]
    )
    json.dumps(data)  # the report is plain data
    everything = make_plan([{"match": "*", "reason": "lab: accepted for the test"}])
    targets = {"cluster": {"kubeconfig": str(backed.target_kubeconfig)}}
    waived = analyze(everything, backed.repo, backed.manifest, targets, resolve=False)
    assert waived.verdict == "waived"  # never "pass"
    assert {f.status for f in waived.findings if f.needed} == {"waived", "independent"}
    # an expired waiver for everything changes nothing
    expired = make_plan([{"match": "*", "reason": "lapsed", "expires": dt.date.today() - dt.timedelta(days=1)}])
    assert analyze(expired, backed.repo, backed.manifest, targets, resolve=False).verdict == "fail"


def test_restoring_into_the_failed_cluster_itself_is_caught(backed: Backed) -> None:
    targets = {"cluster": {"kubeconfig": backed.lab.kubeconfig}}
    result = analyze(make_plan(), backed.repo, backed.manifest, targets, resolve=False)
    target = next(f for f in result.findings if f.purpose.startswith("target Kubernetes API server"))
    assert target.status == "inside" and target.match is not None
    assert target.match.part == "kubernetes_api_endpoints" and "new cluster" in target.hint


# --- the reference finders, object by object (no server needed) -------------------------------------


def test_references_of_flux_sources_ignore_policy_webhooks_and_coredns_files() -> None:
    helm = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "spec": {"url": "oci://ghcr.io/x"}}
    assert [r[0] for r in references(helm)] == ["oci://ghcr.io/x"]
    appset = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationSet",
        "spec": {"generators": [{"git": {"repoURL": "https://git.example.com/a.git"}}]},
    }
    assert [r[2] for r in references(appset)] == ["spec.generators.git.repoURL"]
    ignore = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "webhooks": [{"clientConfig": {"service": {"name": "w", "namespace": "n"}}, "failurePolicy": "Ignore"}],
    }
    (ref,) = references(ignore)
    assert ref.address == "w.n.svc" and not ref.blocks_restore
    corefile = (
        "example.org:53 {\n forward . /etc/resolv.conf\n}\n"
        ".:53 {\n forward . tls://9.9.9.9 8.8.8.8 {\n  max_fails 3\n }\n}"
    )
    assert list(dns_forwarders(corefile)) == ["tls://9.9.9.9", "8.8.8.8"]


# --- the command --------------------------------------------------------------------------------------


def write_plan(path: Path, waivers: list[dict[str, Any]]) -> Path:
    plan = {
        "apiVersion": "drtool/v1",
        "kind": "RestorePlan",
        "name": "indep",
        "variables": {"TARGET_KUBECONFIG": "the target cluster"},
        "target": {"kubernetes": {"kubeconfig": "${TARGET_KUBECONFIG}"}},
        "steps": [{"id": "cluster", "uses": "kubernetes"}],
        "waivers": waivers,
    }
    path.write_text(yaml.safe_dump(plan))
    return path


def test_cli_exits_10_when_something_needed_is_inside(backed: Backed, cli: Cli, tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan.yaml", WAIVERS)
    env = {"DRTOOL_VAR_TARGET_KUBECONFIG": str(backed.target_kubeconfig)}  # the plan reads DRTOOL_VAR_*
    out = tmp_path / "reports"
    proc = cli("--store", str(backed.store), "verify-independence", "--plan", str(plan), "--out", str(out), env=env)
    assert proc.returncode == 10, (proc.stdout, proc.stderr)
    assert "registry.infra.svc:5000" in proc.stdout and "recovery independence: fail" in proc.stdout
    files = sorted(p.suffix for p in out.iterdir())
    assert files == [".html", ".json", ".md"]
    data = json.loads(next(out.glob("*.json")).read_text())
    assert data["kind"] == "independence" and data["independence"]["verdict"] == "fail"
    assert data["backup"]["id"] == backed.manifest.id
    markdown = next(out.glob("*.md")).read_text()
    assert "❌ inside" in markdown and "`registry.infra.svc:5000`" in markdown and "BLOCKS RESTORE" in markdown
    html = next(out.glob("*.html")).read_text()
    assert 'id="findings-table"' in html and "<script" not in html


def test_cli_exits_0_when_everything_inside_is_waived(backed: Backed, cli: Cli, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"TARGET_KUBECONFIG": str(backed.target_kubeconfig)}))
    plan = write_plan(tmp_path / "plan.yaml", [{"match": "*", "reason": "lab: accepted for the test"}])
    args = ["--store", str(backed.store), "verify-independence", "--plan", str(plan), "--values", str(values)]
    proc = cli(*args, "--out", str(tmp_path / "r"), "--no-resolve")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "recovery independence: waived" in proc.stdout


def test_cli_missing_backup_is_a_clean_error(backed: Backed, cli: Cli, tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan.yaml", [])
    env = {"DRTOOL_VAR_TARGET_KUBECONFIG": str(backed.target_kubeconfig)}  # the plan reads DRTOOL_VAR_*
    args = ["--store", str(backed.store), "verify-independence", "--plan", str(plan), "--backup", "2019"]
    assert_clean_error(cli(*args, env=env), 6, "backup 2019 not found")


def test_step_whose_plugin_is_not_in_the_backup_is_noted_not_judged(backed: Backed) -> None:
    plan = Plan.model_validate(
        {
            "name": "two",
            "steps": [{"id": "cluster", "uses": "kubernetes"}, {"id": "members", "uses": "etcd", "needs": ["cluster"]}],
        }
    )
    targets = {"cluster": {"kubeconfig": str(backed.target_kubeconfig)}}
    result = analyze(plan, backed.repo, backed.manifest, targets, resolve=False)
    steps = {s["id"]: s for s in result.to_dict()["steps"]}
    assert steps["cluster"]["analysed"] and not steps["members"]["analysed"]
    assert "not in backup" in steps["members"]["note"] and steps["members"]["needs"] == ["cluster"]
    assert all(f.steps == ["cluster"] for f in result.findings if f.needed)


def test_a_served_name_is_remediated_once_cutover_repoints_every_record_of_it() -> None:
    """An SRV record naming an Ingress host of the old cluster leads to the new one when the plan's cutover
    re-points that host's records; while one of them still points at an old load balancer, it does not."""

    def record(name: str, status: str) -> Finding:
        remedy = Remedy("dns", "cutover re-points the record") if status == "remediated" else None
        purpose = f"{CUTOVER_PURPOSE}{name}. A 203.0.113.10 points at the old cluster's load balancer"
        return Finding("reference", "203.0.113.10", purpose, "zone", status=status, remedy=remedy)

    def served(host: str) -> Finding:
        match = DomainMatch("ingress_hosts", host, "same host as")
        return Finding("reference", f"{host}:443", "address carried by restored state", "SRV", "inside", match=match)

    findings = [
        record("asr.ml.example.com", "remediated"),
        record("dash.ml.example.com", "remediated"),
        record("dash.ml.example.com", "inside"),  # a second record of that name, not re-pointed
        served("asr.ml.example.com"),
        served("dash.ml.example.com"),
    ]
    _remediate_repointed_names(findings)
    asr, dash = findings[3:]
    assert asr.status == "remediated" and asr.remedy == Remedy(
        "dns", "cutover re-points every record of asr.ml.example.com to the new cluster"
    )
    assert dash.status == "inside" and dash.remedy is None
