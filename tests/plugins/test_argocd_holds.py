"""An Argo CD Application restored into a cluster running the real Argo CD syncs nothing until released; the
release step then reports what Argo CD changed.

One living lab (API server, the lab's git server, Argo CD v3.6.2's application controller, repo-server and
Redis, built from the pinned module: opt-in lab component ``argocd``) is both source and target. The source is
a cluster Argo CD had deployed into: namespace ``src`` holds an Application with automated sync (prune and
self-heal) and ``src-web`` the ConfigMaps it had applied, each with Argo CD's tracking annotation. Argo CD in
this lab watches ``argocd`` only, so the source stays as it is. The backup is restored through a namespace map
into ``argocd`` and ``web``, where Argo CD sees the Application at once. Git has moved on since the backup: it
says ``replicas: "3"`` where the backup holds ``"2"``, it has a ConfigMap the backup lacks, and it no longer
has one the backup holds.

Held, the Application has no automated sync: Argo CD compares it (OutOfSync), starts no sync, and writes
nothing into ``web``. The plan's release step gives automated sync back; Argo CD syncs, and the release's
drift report lists the changed field, the created and the pruned ConfigMap, each with Argo CD's manager.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.components.git_server import GitServer
from drtool_lab.lab import BARE_KINDS
from drtool_plugins.git.gitcmd import git
from kubernetes import client

from drtool.kube.holds import HELD
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.kube import KubeLab, start_kube_lab, wait_for

ARGO = ("argoproj.io", "v1alpha1")
AUTOMATED = {"prune": True, "selfHeal": True}
TRANSFORMS = {"namespaces": {"src": "argocd", "src-web": "web"}}
MANAGER = "argocd-controller"  # the field manager Argo CD's syncs write with
plugin = get_plugin("kubernetes")


@pytest.fixture(scope="module")
def argocd(lab_root: Path) -> Iterator[tuple[KubeLab, str]]:
    """The lab and the Application's repository URL (Git as it is now, moved on since the backup)."""
    kube = start_kube_lab(lab_root, "argocd-holds", kinds=(*BARE_KINDS, "git", "argocd"))
    try:
        server = kube.lab.first(GitServer.kind)
        assert isinstance(server, GitServer)
        url = server.create_repo("web")
        _push(url, {"settings.yaml": _configmap("settings", {"replicas": "3"}), "added.yaml": _configmap("added")})
        yield kube, url
    finally:
        kube.lab.down()


def _configmap(name: str, data: dict[str, str] | None = None, namespace: str = "web") -> str:
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        f"data: {data or {'k': 'v'}}\n"
    )


def _push(url: str, files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory(prefix="drtool-argocd-git-") as tmp:
        work = Path(tmp)
        git("init", "--quiet", "--initial-branch=main", work)
        for name, text in files.items():
            (work / "app").mkdir(exist_ok=True)
            (work / "app" / name).write_text(text)
        git("add", ".", cwd=work)
        git("-c", "user.name=drtool lab", "-c", "user.email=lab@drtool.invalid", "commit", "-qm", "web", cwd=work)
        git("push", "--quiet", url, "main", cwd=work)


def _seed_source(kube: KubeLab, url: str) -> None:
    """What Argo CD had left in the source cluster: the Application and the ConfigMaps it applied."""
    with kube.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        for ns in ("src", "src-web"):
            core.create_namespace({"metadata": {"name": ns}})
        for name, data in (("settings", {"replicas": "2"}), ("retired", {"k": "v"})):
            tracked = {"argocd.argoproj.io/tracking-id": f"web:/ConfigMap:web/{name}"}
            meta = {"name": name, "annotations": tracked}
            core.create_namespaced_config_map("src-web", {"metadata": meta, "data": data})
        spec = {
            "project": "default",
            "source": {"repoURL": url, "targetRevision": "main", "path": "app"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
            "syncPolicy": {"automated": AUTOMATED},
        }
        app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "web"}, "spec": spec}
        custom.create_namespaced_custom_object(*ARGO, "src", "applications", app)


def _web(core: Any) -> dict[str, Any]:
    """The ConfigMaps in ``web``, by name (no controller-manager runs: no ``kube-root-ca.crt``)."""
    return {c.metadata.name: c for c in core.list_namespaced_config_map("web").items}


def test_restored_application_syncs_nothing_until_released(argocd: tuple[KubeLab, str], repo: Repository) -> None:
    kube, url = argocd
    _seed_source(kube, url)
    with BackupSession(repo) as session:
        options = {"kubeconfig": kube.kubeconfig, "include_namespaces": ["src", "src-web"]}
        assert session.run_plugin(plugin, options).status == "ok"
        manifest = session.commit()

    target, options = {"kubeconfig": kube.kubeconfig}, {"transforms": TRANSFORMS, "settle": 5}
    restored_at = datetime.now(UTC)
    restored = run_restore(repo, manifest, plugin, target, options=options)
    assert restored.verified, [(c.name, c.detail) for c in restored.checks if not c.ok]
    assert restored.result.details["held"] == ["Application src/web"]
    with kube.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

        def compared() -> dict[str, Any] | None:
            app = custom.get_namespaced_custom_object(*ARGO, "argocd", "applications", "web")
            status = app.get("status") or {}
            at = status.get("reconciledAt")
            done = at and _time(at) >= restored_at.replace(microsecond=0)
            return app if done and (status.get("sync") or {}).get("status") == "OutOfSync" else None

        # Argo CD compared the held Application with Git: out of sync, and it started no sync
        app = wait_for(compared, "Argo CD comparing the held Application with Git", timeout=180)
        assert "automated" not in (app["spec"].get("syncPolicy") or {}) and HELD in app["metadata"]["annotations"]
        assert "operation" not in app and "operationState" not in app["status"]
        web = _web(core)
        assert sorted(web) == ["retired", "settings"] and web["settings"].data == {"replicas": "2"}
        assert not [c for c in web.values() for m in c.metadata.managed_fields or [] if m.manager == MANAGER]
        # the release comes in a later second than this compare: reconciledAt has whole seconds, and the drift
        # report counts a reconcile in the release's own second as one after it (drtool/kube/drift.py)
        compared_at = _time(app["status"]["reconciledAt"])
        wait_for(lambda: datetime.now(UTC) >= compared_at + timedelta(seconds=1), "the second after the compare")

    options = {**options, "release": True, "drift": 180}
    released = run_restore(repo, manifest, plugin, target, options=options)
    assert released.verified, [(c.name, c.detail) for c in released.checks if not c.ok]
    details = released.result.details
    assert details["released"] == [f"Application argocd/web: spec.syncPolicy.automated={json.dumps(AUTOMATED)}"]
    assert details["not_reconciled"] == [], released.result.summary
    drift = details["drift"]
    assert "ConfigMap web/added: created by argocd-controller" in drift, drift
    # Argo CD prunes with foreground deletion: no garbage collector runs here to end it (no controller-manager)
    assert "ConfigMap web/retired: being deleted (finalizers: foregroundDeletion)" in drift, drift
    replicas = "ConfigMap web/settings: data.replicas: backup '2', target '3' by argocd-controller (Update, "
    assert any(line.startswith(replicas) for line in drift), drift
    with kube.api_client() as api:
        web = _web(client.CoreV1Api(api))
        assert web["settings"].data == {"replicas": "3"} and web["added"].data == {"k": "v"}
        assert web["retired"].metadata.deletion_timestamp


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
