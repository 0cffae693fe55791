"""The helm plugin against real servers: release Secrets in a kube-apiserver lab, a chart in an OCI registry
(the lab registry, distribution v3), charts in a classic ``index.yaml`` repository served by ``python -m http.server``.

The restored releases are read back by the real Helm CLI (built from the Go module proxy and cached):
``helm list`` and ``helm history`` against the target lab; the restored charts by ``helm show chart``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.plugins.helm import helm_cli
from drtool_plugins.helm import HelmPlugin
from drtool_plugins.helm.release import decode
from drtool_plugins.helm.sample import push_oci_chart, release, release_secret, seed_releases, write_repository

from drtool.errors import SourceError
from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from drtool.servers import process
from tests.fixtures.kube import KubeLab, start_kube_lab
from tests.fixtures.registry import RegistryLab

plugin = HelmPlugin()


@pytest.fixture(scope="module")
def helm_source(lab_root: Path, registry_source: RegistryLab) -> Iterator[dict[str, Any]]:
    """A control plane with seeded releases, a chart pushed to the OCI source registry, a classic repo."""
    kube = start_kube_lab(lab_root, "helm-src")
    repo_dir = lab_root / "helm-repo"
    write_repository(repo_dir, [("webapp", "0.1.0"), ("webapp", "0.2.0"), ("webapp", "0.3.0"), ("other", "9.9.9")])
    port = process.free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(repo_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        process.wait_until(lambda: process.http_ok(f"http://127.0.0.1:{port}/index.yaml"), 15, "chart repository")
        releases = seed_releases(KubeClient(Connection(kubeconfig=kube.kubeconfig)))
        digest = push_oci_chart(registry_source.client(), "charts/batchjobs", "batchjobs", "1.0.0")
        yield {
            "kube": kube,
            "releases": releases,
            "oci_digest": digest,
            "source": {
                "kubeconfig": kube.readonly_kubeconfig,
                "repositories": [f"http://127.0.0.1:{port}/"],
                "oci_charts": [f"oci://{registry_source.host}/charts/batchjobs:1.0.0"],
            },
        }
    finally:
        server.terminate()
        server.wait()
        kube.lab.down()


def backup(repo: Repository, source: dict[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, source)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def helm(kube: KubeLab, *args: str) -> str:
    """The real Helm CLI against ``kube`` (KUBECONFIG), its cache inside the lab's folder."""
    env = {**os.environ, "KUBECONFIG": kube.kubeconfig, "HELM_CACHE_HOME": str(Path(kube.lab.root) / "helm")}
    proc = subprocess.run([str(helm_cli()), *args], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def helm_json(kube: KubeLab, *args: str) -> Any:
    return json.loads(helm(kube, *args, "-o", "json"))


def test_round_trip_releases_and_charts(
    repo: Repository, helm_source: dict[str, Any], registry_target: RegistryLab, kube_target: KubeLab
) -> None:
    inventory = plugin.discover(helm_source["source"])
    assert inventory.counts == {"repositories": 1, "oci_charts": 1, "releases": 2}
    manifest = backup(repo, helm_source["source"])
    meta = manifest.plugins["helm"].meta
    assert meta["revisions"] == 4
    assert [r["revision"] for r in meta["releases"]["apps/web"]] == [1, 2, 3]
    assert meta["releases"]["apps/web"][-1] == {
        "revision": 3, "status": "deployed", "chart": "webapp", "chart_version": "0.2.0", "app_version": "1.0"
    }  # fmt: skip
    names = {a.name: a for a in manifest.artifacts_of("helm")}
    assert names["releases.ndjson"].sensitive  # release values hold passwords
    charts = sorted(n for n in names if n.startswith("charts/"))
    # the versions releases use (0.1.0, 0.2.0), not 0.3.0 nor the unused chart
    assert [c.rsplit("/", 1)[1] for c in charts] == ["webapp-0.1.0.tgz", "webapp-0.2.0.tgz"]

    target = {"kubeconfig": kube_target.kubeconfig, "registry": registry_target.host}
    dry = run_restore(repo, manifest, plugin, target, options={"dry_run": True})
    assert (dry.checks, dry.verification, dry.verified, dry.failed) == ([], "none", False, False)  # nothing to check
    assert not dry.result.changed and dry.result.details["written"] == 4 and dry.result.details["charts_changed"] == 3
    assert helm_json(kube_target, "list", "-A") == []  # nothing written

    outcome = run_restore(repo, manifest, plugin, target)
    assert outcome.verified, outcome.checks
    assert outcome.result.changed

    # Helm itself reads the restored releases
    listed = {r["name"]: r for r in helm_json(kube_target, "list", "-A")}
    assert set(listed) == {"web", "jobs"}
    assert listed["web"]["revision"] == "3" and listed["web"]["chart"] == "webapp-0.2.0"
    assert listed["web"]["status"] == "deployed" and listed["web"]["namespace"] == "apps"
    history = helm_json(kube_target, "history", "web", "-n", "apps")
    assert [(h["revision"], h["status"], h["chart"]) for h in history] == [
        (1, "superseded", "webapp-0.1.0"),
        (2, "superseded", "webapp-0.2.0"),
        (3, "deployed", "webapp-0.2.0"),
    ]
    values = helm_json(kube_target, "get", "values", "web", "-n", "apps")
    assert values == {"greeting": "revision 3", "db": {"password": "s3cret-lab-only"}}

    # the labels Helm queries by, read through the official client
    from kubernetes import client as k8s

    with kube_target.api_client() as api:
        secret = k8s.CoreV1Api(api).read_namespaced_secret("sh.helm.release.v1.web.v3", "apps")
    assert secret.type == "helm.sh/release.v1"
    assert secret.metadata.labels == {"owner": "helm", "name": "web", "status": "deployed", "version": "3"}
    wire = {"data": {"release": base64.b64encode(base64.b64decode(secret.data["release"])).decode()}}
    assert decode(wire)["config"]["greeting"] == "revision 3"

    # charts: classic-repository charts and the OCI chart pulled back from the target by Helm
    for ref, version in (("charts/webapp", "0.1.0"), ("charts/webapp", "0.2.0"), ("charts/batchjobs", "1.0.0")):
        oci = f"oci://{registry_target.host}/{ref}"
        shown = helm(kube_target, "show", "chart", oci, "--version", version, "--plain-http")
        assert f"version: {version}" in shown, shown
    again = run_restore(repo, manifest, plugin, target)
    assert again.verified and not again.result.changed, again.result.summary

    # Helm moves on after the restore: an upgrade supersedes revision 3 and writes revision 4 (as Helm's
    # Secret driver does, field manager "helm"); listed, not failed
    client = KubeClient(Connection(kubeconfig=kube_target.kubeconfig))
    upgrade(client, release("web", "apps", 3, "webapp", "0.2.0", "superseded"), "PUT")
    upgrade(client, release("web", "apps", 4, "webapp", "0.2.0", "deployed"), "POST")
    ctx = PluginRestoreContext(repo, manifest, "helm")
    (releases,) = [c for c in plugin.verify(ctx, target, {}) if c.name == "helm: release Secrets"]
    assert releases.ok, releases.detail
    assert "upgraded in the target since the restore (not compared): apps/web revision 4 deployed by helm" in (
        releases.detail
    )
    assert "superseded by those upgrades (status only): apps/sh.helm.release.v1.web.v3" in releases.detail
    # a restored revision whose record someone changed fails
    upgrade(client, {**release("web", "apps", 1, "webapp", "0.1.0", "superseded"), "config": {}}, "PUT", "kubectl")
    (releases,) = [c for c in plugin.verify(ctx, target, {}) if c.name == "helm: release Secrets"]
    assert not releases.ok and "apps/sh.helm.release.v1.web.v1: its release record differs" in releases.detail


def upgrade(client: KubeClient, rel: dict[str, Any], method: str, manager: str = "helm") -> None:
    """Write a release Secret as Helm's Secret driver does on `helm upgrade` (Update the old, Create the new)."""
    secret = release_secret(rel)
    path = f"/api/v1/namespaces/{rel['namespace']}/secrets" + (
        f"/{secret['metadata']['name']}" if method == "PUT" else ""
    )
    client.request(method, path, params={"fieldManager": manager}, body=json.dumps(secret).encode())


def test_releases_need_a_cluster_and_nothing_is_half_written(
    repo: Repository, helm_source: dict[str, Any], registry_target: RegistryLab
) -> None:
    source = {"kubeconfig": helm_source["source"]["kubeconfig"]}
    manifest = backup(repo, source)
    with pytest.raises(SourceError, match="names no cluster"):
        run_restore(repo, manifest, plugin, {"registry": registry_target.host})


def test_bad_repository_fails_the_backup(repo: Repository) -> None:
    port = process.free_port()  # nothing listens there
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"repositories": [f"http://127.0.0.1:{port}/"]})
    assert outcome.status == "failed" and "unreachable" in outcome.error
