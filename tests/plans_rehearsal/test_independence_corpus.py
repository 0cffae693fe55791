"""The static analysis scored on a corpus of seeded references (tests/independence_corpus/, the project's own data).

The corpus is written into a real local store in each plugin's own artifact format (Kubernetes objects as
NDJSON records, Helm releases as their storage Secrets, a zone as master-file lines, the MLflow registry
document, Vault KV lines, and a files tar made by the files plugin itself), then ``analyze()`` runs on it
with the plan that restores it. Every seeded reference must be found with its expected verdict and its
evidence; no look-alike may be reported at all; no secret may reach the report. The scores are printed
(``pytest -s``) for docs/independence.md.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_plugins.files import FilesPlugin

from drtool.independence.analysis import IndependenceReport, analyze
from drtool.independence.domain import parse_address
from drtool.plans.loader import load_plan
from drtool.plugin.contract import BackupContext
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.report.render import write_report
from tests.fixtures.core import Cli

CORPUS = Path(__file__).parents[1] / "independence_corpus"
# resource (plural) and API group of the corpus's kinds, as discovery would give them
RESOURCES = {
    "Namespace": ("namespaces", ""),
    "Service": ("services", ""),
    "ConfigMap": ("configmaps", ""),
    "Secret": ("secrets", ""),
    "PersistentVolume": ("persistentvolumes", ""),
    "Endpoints": ("endpoints", ""),
    "Deployment": ("deployments", "apps"),
    "Application": ("applications", "argoproj.io"),
    "InferenceService": ("inferenceservices", "serving.kserve.io"),
    "Mirror": ("mirrors", "example.com"),
    "ValidatingWebhookConfiguration": ("validatingwebhookconfigurations", "admissionregistration.k8s.io"),
    "NetworkPolicy": ("networkpolicies", "networking.k8s.io"),
    "Ingress": ("ingresses", "networking.k8s.io"),
    "Certificate": ("certificates", "cert-manager.io"),
}


class CorpusPlugin:
    """Writes part of the corpus into a backup under a real plugin's name, in that plugin's format."""

    description = "the independence corpus"

    def __init__(self, name: str, write: Callable[[BackupContext], dict[str, Any]]) -> None:
        self.name, self._write = name, write

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
        return self._write(ctx)


def _artifact(ctx: BackupContext, name: str, data: bytes, meta: dict[str, Any], sensitive: bool = False) -> None:
    with ctx.artifact(name, meta=meta, sensitive=sensitive) as sink:
        sink.write(data)


def write_objects(ctx: BackupContext) -> dict[str, Any]:
    by_type: dict[tuple[str, str, str, str], list[bytes]] = {}
    for doc in yaml.safe_load_all((CORPUS / "kubernetes.yaml").read_text()):
        status = doc.pop("status", None)
        if doc["kind"] == "Secret":
            doc["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in doc.pop("stringData").items()}
        resource, group = RESOURCES[doc["kind"]]
        api_version = doc["apiVersion"]
        record = {"object": doc, "uid": f"uid-{doc['metadata']['name']}"} | ({"status": status} if status else {})
        key = (resource, group, api_version.rsplit("/", 1)[-1], doc["kind"])
        by_type.setdefault(key, []).append(json.dumps(record).encode() + b"\n")
    for (resource, group, version, kind), lines in by_type.items():
        cluster_scoped = ("Namespace", "PersistentVolume", "ValidatingWebhookConfiguration")
        meta = {"format": "ndjson-objects-v1", "group": group, "version": version, "resource": resource,
                "kind": kind, "namespaced": kind not in cluster_scoped, "status_subresource": False, "crd": False,
                "storage_version": version}  # fmt: skip
        _artifact(ctx, f"resources/{group or 'core'}/{resource}.ndjson", b"".join(lines), meta, kind == "Secret")
    return {"failure_domain": yaml.safe_load((CORPUS / "domain.yaml").read_text())}


def write_releases(ctx: BackupContext) -> dict[str, Any]:
    lines = []
    for release in yaml.safe_load((CORPUS / "helm-releases.yaml").read_text()):
        record = base64.b64encode(gzip.compress(json.dumps(release).encode(), mtime=0))
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{release['name']}.v{release['version']}",
                               "namespace": release["namespace"], "labels": {"owner": "helm"}},
                  "data": {"release": base64.b64encode(record).decode()}}  # fmt: skip
        lines.append(json.dumps(secret).encode() + b"\n")
    _artifact(ctx, "releases.ndjson", b"".join(lines), {"format": "ndjson-secrets-v1"}, sensitive=True)
    index = {"format": "drtool-helm-v1", "repositories": [], "oci_charts": []}
    _artifact(ctx, "charts.json", json.dumps(index).encode(), {"format": "drtool-helm-v1"})
    return {}


def write_zone(ctx: BackupContext) -> dict[str, Any]:
    zone = "ml.example.com."
    meta = {"format": "dns-zone-v1", "zone": zone, "server": "198.51.100.53:53"}
    _artifact(ctx, f"zones/{zone}zone", (CORPUS / "zone-ml.example.com.db").read_bytes(), meta)
    cut = {"record": "api.ml.example.com. A 203.0.113.10", "source": f"zone {zone}", "address": "203.0.113.10",
           "owner": "Service ml/gateway"}  # fmt: skip
    return {"cutover": [cut], "zones": {zone: {}}}


def write_registry(ctx: BackupContext) -> dict[str, Any]:
    _artifact(ctx, "registry.json", (CORPUS / "registry.json").read_bytes(), {"format": 1})
    return {}


def write_kv(ctx: BackupContext) -> dict[str, Any]:
    meta = {"format": "kv2-ndjson", "mount": "secret"}
    _artifact(ctx, "kv/secret.ndjson", (CORPUS / "vault-kv-secret.ndjson").read_bytes(), meta, sensitive=True)
    return {}


@dataclasses.dataclass
class Corpus:
    report: IndependenceReport
    store: Path
    env: dict[str, str]  # the plan's variables


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    from drtool.backends.local import LocalBackend
    from tests.fixtures.core import PASSPHRASE

    work = tmp_path_factory.mktemp("corpus")
    repo = Repository.init(LocalBackend(work / "store"), passphrase=PASSPHRASE)
    plugins = [
        CorpusPlugin("kubernetes", write_objects),
        CorpusPlugin("helm", write_releases),
        CorpusPlugin("dns-certs", write_zone),
        CorpusPlugin("model-registry", write_registry),
        CorpusPlugin("vault", write_kv),
    ]
    with BackupSession(repo) as session:
        for plugin in plugins:
            assert session.run_plugin(plugin, {}).status == "ok"
        assert session.run_plugin(FilesPlugin(), {"paths": [str(CORPUS / "files")]}).status == "ok"
        manifest = session.commit()
    kubeconfig = work / "target.kubeconfig"
    cluster = {"name": "new", "cluster": {"server": "https://198.51.100.100:6443"}}
    context = {"name": "c", "context": {"cluster": "new", "user": "u"}}
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster], "users": [{"name": "u", "user": {}}],
              "contexts": [context], "current-context": "c"}  # fmt: skip
    kubeconfig.write_text(yaml.safe_dump(config))
    variables = {"TARGET_KUBECONFIG": str(kubeconfig), "ZONE_DIR": str(work / "zones")}
    variables["FILES_DIR"] = str(work / "files")
    env = {f"DRTOOL_VAR_{name}": value for name, value in variables.items()}  # what a plan reads (docs/plans.md)
    loaded = load_plan(CORPUS / "plan.yaml", env=env).require()
    targets = {s.id: loaded.target_for(s) for s in loaded.steps}
    return Corpus(analyze(loaded, repo, manifest, targets, resolve=False), work / "store", env)


@pytest.fixture(scope="module")
def corpus_report(corpus: Corpus) -> IndependenceReport:
    return corpus.report


EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text())


def _endpoint(address: str) -> tuple[str, int | None] | None:
    parsed = parse_address(address)
    return (parsed.host, parsed.port) if parsed else None


def score(report: IndependenceReport) -> dict[str, Any]:
    """Recall on in-domain references, verdicts on all, and how many look-alikes were reported."""
    findings, refs = report.findings, EXPECTED["references"]
    independent = set(report.finder.get("independent_addresses") or [])
    results = {}
    for ref in EXPECTED["references"]:
        same = [f for f in findings if _endpoint(f.address) == _endpoint(ref["address"])]
        if not same and ref["address"] in independent:
            results[ref["id"]] = "independent"
            continue
        ok = [f for f in same if ref.get("evidence", "") in f.evidence]
        results[ref["id"]] = ok[0].status if ok else "missing"
    in_domain = [r for r in EXPECTED["references"] if r["status"] != "independent"]
    found_in_domain = [r for r in in_domain if results[r["id"]] == r["status"]]
    hosts = {(_endpoint(f.address) or ("", None))[0] for f in findings} | {
        (_endpoint(a) or ("", None))[0] for a in independent
    }
    lookalikes_reported = [lk["id"] for lk in EXPECTED["lookalikes"] if hosts & {h.lower() for h in lk["hosts"]}]
    expected_hosts = {(_endpoint(r["address"]) or ("", None))[0] for r in EXPECTED["references"]}
    flagged = [f for f in findings if f.status in ("inside", "remediated", "unknown") and "finder" in f.found_by]
    false_flags = [f.address for f in flagged if (_endpoint(f.address) or ("", None))[0] not in expected_hosts]
    return {
        "references": len(EXPECTED["references"]),
        "in_domain": len(in_domain),
        "lookalikes": len(EXPECTED["lookalikes"]),
        "recall_in_domain": len(found_in_domain) / len(in_domain),
        "verdicts_right": sum(results[r["id"]] == r["status"] for r in EXPECTED["references"]),
        "wrong": {r["id"]: (r["status"], results[r["id"]]) for r in refs if results[r["id"]] != r["status"]},
        "lookalikes_reported": lookalikes_reported,
        "false_flags": false_flags,
        "precision_flagged": (len(flagged) - len(false_flags)) / len(flagged) if flagged else 1.0,
    }


def test_corpus_has_every_shape_plugin_and_field_kind() -> None:
    refs = EXPECTED["references"]
    assert len(refs) >= 40 and len(EXPECTED["lookalikes"]) >= 20
    kinds = {r["kind"] for r in refs}
    every = {"env", "args", "command", "annotation", "configmap-data", "secret-data", "spec", "helm-values"}
    every |= {"helm-manifest", "dns-record", "mlflow-source", "mlflow-link", "mlflow-tag", "vault-kv", "file"}
    assert every <= kinds
    assert {r["status"] for r in refs} == {"inside", "remediated", "independent"}


def test_every_in_domain_reference_is_found_with_its_verdict_and_no_lookalike_is_reported(
    corpus_report: IndependenceReport,
) -> None:
    figures = score(corpus_report)
    print("\ncorpus score:", json.dumps(figures, indent=1))
    assert figures["wrong"] == {}
    assert figures["recall_in_domain"] == 1.0
    assert figures["lookalikes_reported"] == [] and figures["false_flags"] == []


def test_who_found_what_and_how_it_is_remediated(corpus_report: IndependenceReport) -> None:
    for ref in EXPECTED["references"]:
        if ref["status"] == "independent":
            continue
        finding = next(f for f in corpus_report.findings if _endpoint(f.address) == _endpoint(ref["address"]))
        assert set(ref["by"]) <= set(finding.found_by), (ref["id"], finding.found_by)
        if "finder" in ref["by"]:
            assert ref["kind"] in finding.field_kinds, (ref["id"], finding.field_kinds)
    by_address = {f.address: f for f in corpus_report.findings}
    mapped = by_address["registry.infra.svc:5000"]
    assert mapped.remedy is not None and mapped.remedy.step == "cluster" and "registry.dr.example.com" in mapped.detail
    moved = by_address["http://api.team-a.svc:8080"]
    assert moved.status == "inside" and "restores this Service as team-a-dr/api" in moved.detail
    source = by_address["http://mlflow.ml.svc:5000"]
    assert source.remedy is not None and source.remedy.step == "models"
    cut = next(f for f in corpus_report.findings if f.address == "203.0.113.10")
    assert cut.remedy is not None and cut.remedy.step == "dns" and "198.51.100.50" in cut.remedy.how
    assert corpus_report.verdict == "fail"


def test_report_shows_no_secret_and_names_what_was_not_searched(
    corpus_report: IndependenceReport, tmp_path: Path
) -> None:
    data = {"kind": "independence", "plan": {"name": "corpus"}, "independence": corpus_report.to_dict()}
    paths = write_report(data, tmp_path, "corpus")
    for path in paths.values():
        text = path.read_text()
        for secret in EXPECTED["secrets"]:
            assert secret not in text, (secret, path.name)
    finder = corpus_report.finder
    assert set(finder["scanned"]) == {"kubernetes", "helm", "dns-certs", "model-registry", "vault", "files"}
    assert finder["unscanned"] == {"helm": {"artifacts": 1, "examples": ["charts.json"]}}


def test_cli_shows_remediated_findings_and_exits_10(corpus: Corpus, cli: Cli, tmp_path: Path) -> None:
    args = ["--store", str(corpus.store), "verify-independence", "--plan", str(CORPUS / "plan.yaml")]
    proc = cli(*args, "--no-resolve", "--out", str(tmp_path), env=corpus.env)
    assert proc.returncode == 10, proc.stdout[-2000:] + proc.stderr
    # 9 remediated references, 8 findings: the Vault annotation and the Vault env var are one address
    assert "37 inside, 4 unknown, 0 waived, 8 remediated" in proc.stdout and "Traceback" not in proc.stderr
    markdown = next(tmp_path.glob("*.md")).read_text()
    assert "🔧 remediated" in markdown and "remediated by step cluster: image_registry_map" in markdown


def test_a_plan_transform_remediates_as_the_step_option_does(corpus: Corpus, cli: Cli, tmp_path: Path) -> None:
    plan = yaml.safe_load((CORPUS / "plan.yaml").read_text())
    del plan["steps"][0]["with"]  # image_registry_map and namespace_map, now as the plan's transforms
    plan["transforms"] = {"image-registries": {"registry.infra.svc:5000": "registry.dr.example.com"},
                          "namespaces": {"team-a": "team-a-dr"}}  # fmt: skip
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    args = ["--store", str(corpus.store), "verify-independence", "--plan", str(path), "--no-resolve"]
    proc = cli(*args, "--out", str(tmp_path / "out"), env=corpus.env)
    assert proc.returncode == 10, proc.stdout[-2000:] + proc.stderr
    assert "37 inside, 4 unknown, 0 waived, 8 remediated" in proc.stdout
    markdown = next((tmp_path / "out").glob("*.md")).read_text()
    assert "remediated by step cluster: transform image-registries points registry.infra.svc:5000" in markdown
    assert "restores this Service as team-a-dr/api" in markdown
