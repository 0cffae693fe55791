"""Restoring into another Kubernetes version: a seeded lab of one release backed up with the kubernetes and
kueue plugins and restored into an empty lab of the next (v1.35.4 -> v1.37.2, v1.37.2 -> v1.38.0-beta.0).

Both labs are bare (etcd + kube-apiserver: the lab's controllers are built for v1.37.2 only). What differs
between the two releases is read from both servers' discovery, not assumed: every group version the backup
holds that the target does not serve must be named by the restore (converted, in its details) or refuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from drtool_lab.gomods import KUBE_VERSION
from drtool_plugins.kubernetes import KubernetesPlugin
from drtool_plugins.kueue import KueuePlugin

from drtool.kube.artifacts import FORMAT
from drtool.kube.client import KubeClient
from drtool.kube.discovery import ResourceType, crd_index, served_versions
from drtool.kube.settings import Connection
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab, start_kube_lab

PAIRS = [("v1.35.4", KUBE_VERSION), (KUBE_VERSION, "v1.38.0-beta.0")]
KUEUE_ALLOW = {"allow_missing": "kubeconfig-secret"}  # the seeded MultiKueueCluster's Secret does not exist


def group_versions(kube: KubeLab) -> set[str]:
    """Every built-in group version the server serves (``v1`` for the core group), from its own discovery:
    what its Kubernetes release serves (custom resources' group versions come with their CRDs, in the backup)."""
    client = KubeClient(Connection.from_mapping({"kubeconfig": kube.kubeconfig}))
    crds = crd_index(client)
    served = served_versions(client).items()
    return {f"{g}/{v}" if g else v for (g, r), versions in served if (g, r) not in crds for v in versions}


def server_version(kube: KubeLab) -> str:
    with kube.apiserver.access().session() as s:
        return s.get(f"{kube.apiserver.url}/version", timeout=10).json()["gitVersion"]


@pytest.fixture(scope="module", params=PAIRS, ids=lambda p: f"{p[0]}-to-{p[1]}")
def pair(request: pytest.FixtureRequest, lab_root: Path) -> Iterator[tuple[KubeLab, KubeLab]]:
    """A seeded lab of the older release and an empty one of the newer."""
    old, new = request.param
    source = start_kube_lab(lab_root, f"ver-src-{old.replace('.', '')[:12]}", objects=0, kubernetes=old)
    try:
        target = start_kube_lab(lab_root, f"ver-dst-{new.replace('.', '')[:12]}", kubernetes=new)
    except BaseException:
        source.lab.down()
        raise
    yield source, target
    target.lab.down()
    source.lab.down()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    from drtool.backends.local import LocalBackend

    return Repository.init(LocalBackend(tmp_path_factory.mktemp("versions") / "store"), passphrase=PASSPHRASE)


def backup(repo: Repository, kube: KubeLab) -> Manifest:
    with BackupSession(repo) as session:
        for plugin in (KubernetesPlugin(), KueuePlugin()):
            outcome = session.run_plugin(plugin, {"kubeconfig": kube.kubeconfig})
            assert outcome.status == "ok", outcome.error
        return session.commit()


def backed_up_group_versions(manifest: Manifest) -> dict[str, str]:
    """``group/version`` -> a resource of the backup in it (the kubernetes plugin's artifacts)."""
    objects = [a for a in manifest.artifacts_of("kubernetes") if a.meta.get("format") == FORMAT]
    types = [ResourceType.from_meta(dict(a.meta)) for a in objects]
    return {t.api_version: t.key for t in types}


def test_restore_into_the_next_kubernetes_release(repo: Repository, pair: tuple[KubeLab, KubeLab]) -> None:
    source, target = pair
    assert server_version(source) != server_version(target)
    manifest = backup(repo, source)
    only_source = group_versions(source) - group_versions(target)
    only_target = group_versions(target) - group_versions(source)
    print(f"{server_version(source)} only: {sorted(only_source)}; {server_version(target)} only: {sorted(only_target)}")

    outcome = run_restore(repo, manifest, KubernetesPlugin(), {"kubeconfig": target.kubeconfig})
    failing = [c for c in outcome.checks if not c.ok]
    assert not failing, failing
    converted = outcome.result.details["versions"]["converted"]
    for group_version, key in backed_up_group_versions(manifest).items():
        if group_version in only_source:  # held by the backup, not served by the target: named as converted
            assert any(line.startswith(f"{key}: {group_version} -> ") for line in converted), (key, converted)
    assert all(line.split(" -> ")[0].split(": ")[1] in only_source for line in converted), converted

    kueue = run_restore(repo, manifest, KueuePlugin(), {"kubeconfig": target.kubeconfig}, options=KUEUE_ALLOW)
    assert not [c for c in kueue.checks if not c.ok and "Active" not in c.name]  # no Kueue controller runs


def test_the_labs_run_the_releases_asked_for(pair: tuple[KubeLab, KubeLab], request: pytest.FixtureRequest) -> None:
    old, new = request.node.callspec.params["pair"]
    assert (server_version(pair[0]), server_version(pair[1])) == (old, new)
