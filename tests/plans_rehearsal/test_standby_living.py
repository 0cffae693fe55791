"""A warm standby in the living lab (docs/standby.md): two clusters, the store in MinIO, `drtool follow -p
kubernetes` on the primary, `drtool standby` hydrating the second; every result read back through the
target's own API with the official client."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drtool.backends.backend import open_backend
from drtool.backup import run_backup
from drtool.errors import Fenced, PrimaryReachable
from drtool.follow import FollowSession, run_follow
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.fences import refuse_if_fenced
from drtool.repo.repository import Repository
from drtool.standby.failover import failback, failover
from drtool.standby.hydrate import Standby
from drtool.standby.state import NAMESPACE, StandbyBusy, StateStore
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab, lab_name, start_kube_lab, wait_for

SET = "prod"
PLUGIN = "kubernetes"
SEEDED = 120
NS = "standby-app"
RESUMED = "standby-resumed"  # the kill-mid-apply test's app, beside NS on the seeded primary it shares


@pytest.fixture
def standby_target(kube_target: KubeLab) -> KubeLab:
    """A fresh, empty control plane: the standby."""
    return kube_target


@pytest.fixture
def primary(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    """A writable primary holding only what the test makes (its own: the tests change and stop it). Bare: the
    seed's CRDs cost a primary and its standby about 20 CPU-seconds, and what these tests prove (failover,
    held deletions, tampered links, failback) does not depend on them; `seeded_primary` hydrates the seed."""
    kube = start_kube_lab(lab_root, lab_name("pri", request))
    yield kube
    kube.lab.down()


@pytest.fixture(scope="module")
def seeded_primary(lab_root: Path) -> Iterator[KubeLab]:
    """A primary seeded like a real cluster (CRDs, custom resources, owner chains): hydration must apply all of
    it, and its size keeps a standby applying the full long enough to be killed mid-apply. Shared by the two
    tests that use it: neither stops it, each writes only a namespace of its own and judges only that one."""
    kube = start_kube_lab(lab_root, "pri-seeded", objects=SEEDED)
    yield kube
    kube.lab.down()


@pytest.fixture
def store(s3_store_url: str) -> Repository:
    return Repository.init(open_backend(s3_store_url), passphrase=PASSPHRASE, keyfile_secret=secrets.token_bytes(32))


class Follower:
    """`drtool follow -p kubernetes` on the primary, in a thread, until ``stop``."""

    def __init__(self, repo: Repository, kube: KubeLab, backup_set: str = SET) -> None:
        self.session = FollowSession(repo, PLUGIN, backup_set, {"period": 1})
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(repo, kube), daemon=True)
        self.thread.start()

    def _run(self, repo: Repository, kube: KubeLab) -> None:
        try:
            run_follow(repo, get_plugin(PLUGIN), {"kubeconfig": kube.kubeconfig}, self.session)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.session.stop.set()
        self.thread.join(60)


def _standby(repo: Repository, target: KubeLab, delete_after: float = 3600.0, backup_set: str = SET) -> Standby:
    return Standby(
        repo,
        backup_set,
        [get_plugin(PLUGIN)],
        {"kubeconfig": target.kubeconfig},
        StateStore(target.kubeconfig, backup_set),
        delete_after=delete_after,
    )


def _core(kube: KubeLab) -> Any:
    from kubernetes import client

    return client.CoreV1Api(kube.api_client())


def _apps(kube: KubeLab) -> Any:
    from kubernetes import client

    return client.AppsV1Api(kube.api_client())


def _configmaps(kube: KubeLab, namespace: str = NS) -> dict[str, dict[str, str]]:
    return {c.metadata.name: dict(c.data or {}) for c in _core(kube).list_namespaced_config_map(namespace).items}


def _app(kube: KubeLab, configmaps: int = 5, namespace: str = NS) -> None:
    """A namespace with ConfigMaps and a Deployment of 2 replicas on the primary."""
    from kubernetes import client

    _core(kube).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    for i in range(configmaps):
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i}"), data={"v": "1"})
        _core(kube).create_namespaced_config_map(namespace, body)
    labels = {"app": "web"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="registry.invalid/web:1")]),
            ),
        ),
    )
    _apps(kube).create_namespaced_deployment(namespace, deployment)


def _hydrated(standby: Standby, check: Any, what: str, timeout: float = 180.0) -> Any:
    """Standby rounds until ``check()`` holds on the target."""

    def step() -> Any:
        standby.round()
        return check()

    return wait_for(step, what, timeout)


def _hydrated_standby(store: Repository, primary: KubeLab, target: KubeLab) -> Standby:
    """The app on the primary, followed until the standby holds its full; the follower stopped again."""
    _app(primary)
    follower = Follower(store, primary)
    standby = _standby(store, target)
    try:
        _hydrated(standby, lambda: "cm-4" in _configmaps(target), "the full on the standby")
    finally:
        follower.stop()
    return standby


def _record(target: KubeLab) -> dict[str, Any]:
    record = StateStore(target.kubeconfig, SET).read()
    assert record is not None, "no standby record on the target"
    return record.to_json()


# --- the record on the standby cluster ------------------------------------------------------------


def test_two_standbys_cannot_advance_one_record(standby_target: KubeLab) -> None:
    first, second = StateStore(standby_target.kubeconfig, SET), StateStore(standby_target.kubeconfig, SET)
    a, b = first.load(), second.load()
    a.applied = 1
    first.save(a)
    b.applied = 7
    with pytest.raises(StandbyBusy, match="changed by another process"):
        second.save(b)
    assert _record(standby_target)["applied"] == 1


def test_a_record_past_one_configmap_is_kept_in_parts(standby_target: KubeLab) -> None:
    """Tens of thousands of objects' identities do not fit the 1 MiB of one ConfigMap: the record goes into
    parts, read back whole, and the parts of a record replaced by a smaller one are deleted."""
    store = StateStore(standby_target.kubeconfig, SET)
    record = store.load()
    tracked = {f"configmaps/v1 ns-{i}/cm-{i}": {"uid": secrets.token_hex(24)} for i in range(60000)}
    record.plugins[PLUGIN] = {"plugin": PLUGIN, "objects": tracked}
    store.save(record)
    selector = {"label_selector": "drtool.dev/standby-record=standby-prod"}
    assert len(_core(standby_target).list_namespaced_config_map(NAMESPACE, **selector).items) >= 2
    assert StateStore(standby_target.kubeconfig, SET).read().plugins[PLUGIN]["objects"] == tracked  # type: ignore[union-attr]
    record.plugins[PLUGIN] = {"plugin": PLUGIN}
    store.save(record)
    assert not _core(standby_target).list_namespaced_config_map(NAMESPACE, **selector).items
    assert StateStore(standby_target.kubeconfig, SET).read().plugins[PLUGIN] == {"plugin": PLUGIN}  # type: ignore[union-attr]


# --- hydration ------------------------------------------------------------------------------------


def test_hydration_applies_changes_held(store: Repository, seeded_primary: KubeLab, standby_target: KubeLab) -> None:
    """Every object of a seeded cluster applied (nothing skipped), held (no replicas), and then its changes."""
    primary = seeded_primary
    _app(primary)
    follower = Follower(store, primary)
    try:
        standby = _standby(store, standby_target)
        _hydrated(standby, lambda: "cm-4" in _configmaps(standby_target), "the full on the standby")
        deployment = _apps(standby_target).read_namespaced_deployment("web", NS)
        assert deployment.spec.replicas == 0  # held: the standby runs nothing
        _core(primary).patch_namespaced_config_map("cm-1", NS, {"data": {"v": "2"}})
        _hydrated(standby, lambda: _configmaps(standby_target)["cm-1"] == {"v": "2"}, "the update on the standby")
        record = _record(standby_target)
        assert record["applying"] is None and record["applied"] >= 2 and not record["skipped"]
        assert standby.metrics.lag(SET) is not None
    finally:
        follower.stop()


# --- failover -------------------------------------------------------------------------------------


def test_failover_is_refused_while_the_primary_answers_then_forced(
    store: Repository, primary: KubeLab, standby_target: KubeLab
) -> None:
    standby = _hydrated_standby(store, primary, standby_target)
    with pytest.raises(PrimaryReachable, match="still reachable"):
        failover(store, standby, primary=[primary.apiserver.url])
    assert _apps(standby_target).read_namespaced_deployment("web", NS).spec.replicas == 0
    result = failover(store, standby, primary=[primary.apiserver.url], force=True)
    assert result.forced and result.reachable == [primary.apiserver.url]
    assert _apps(standby_target).read_namespaced_deployment("web", NS).spec.replicas == 2  # released
    assert result.rpo_s is not None and result.rto_s > 0
    assert _record(standby_target)["failover"]["rto_s"] == result.rto_s
    with pytest.raises(Fenced):
        refuse_if_fenced(store, SET)


def test_failover_of_a_stopped_primary_needs_no_force(
    store: Repository, primary: KubeLab, standby_target: KubeLab, tmp_path: Path
) -> None:
    """With a plan: its step of a plugin the standby does not hydrate (files here, checkpoints in the bench) is
    restored from the set's backup, and service is back when its check holds (the RTO ends there)."""
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(b"the primary's CA")
    run_backup(store, [get_plugin("files")], {"files": {"paths": [str(tmp_path / "pki")]}}, backup_set=SET)
    _app(primary)
    follower = Follower(store, primary)
    standby = _standby(store, standby_target)
    try:
        _hydrated(standby, lambda: "cm-4" in _configmaps(standby_target), "the full on the standby")
        _core(primary).patch_namespaced_config_map("cm-2", NS, {"data": {"v": "last"}})
        wait_for(lambda: len(standby.watcher.poll({}).links) >= 2, "a delta with the last change")
    finally:
        follower.stop()
    url = primary.apiserver.url
    primary.lab.down()
    plan = _failover_plan(tmp_path)
    result = failover(store, standby, plan=plan)  # the primary to probe: the API server the follower's full recorded
    assert not result.forced and not result.reachable and result.primary == [url]
    assert _configmaps(standby_target)["cm-2"] == {"v": "last"}  # the last link applied by the failover
    assert _apps(standby_target).read_namespaced_deployment("web", NS).spec.replicas == 2
    (step,) = result.steps
    assert step["ok"] and step["id"] == "pki", step
    assert next((tmp_path / "restored").rglob("ca.crt")).read_bytes() == b"the primary's CA"
    (check,) = result.checks
    assert result.ok and check["ok"] and result.rto_s == round(check["green_s"], 3), result.checks


def _failover_plan(tmp_path: Path) -> Any:
    """A failover plan: the cluster objects (hydrated), a files step, a check of the last change."""
    steps = [{"id": "cluster-objects", "uses": PLUGIN}, {"id": "pki", "uses": "files"}]
    check = {"type": "kube-object", "id": "last-change", "apiVersion": "v1", "kind": "ConfigMap",
             "namespace": NS, "name": "cm-2", "field": "data.v", "equals": "last"}  # fmt: skip
    body = {"name": "failover", "steps": steps, "checks": [check],
            "target": {"files": {"path": str(tmp_path / "restored")}}}  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(body))
    return check_file(tmp_path / "plan.json", load_plugins()).require()


# --- faults ---------------------------------------------------------------------------------------


def test_a_mass_deletion_is_held_until_delete_after(
    store: Repository, primary: KubeLab, standby_target: KubeLab
) -> None:
    _app(primary)
    follower = Follower(store, primary)
    try:
        standby = _standby(store, standby_target)
        _hydrated(standby, lambda: "cm-4" in _configmaps(standby_target), "the full on the standby")
        _core(primary).delete_collection_namespaced_config_map(NS)
        _hydrated(
            standby,
            lambda: len(_record(standby_target)["plugins"][PLUGIN].get("deferred") or {}) >= 5,
            "the deletions recorded as held",
        )
        assert len(_configmaps(standby_target)) >= 5  # nothing deleted on the standby yet
        released = _standby(store, standby_target, delete_after=0)
        _hydrated(released, lambda: not _configmaps(standby_target), "the deletions applied once due")
    finally:
        follower.stop()


def test_a_tampered_link_is_skipped_and_reported(store: Repository, primary: KubeLab, standby_target: KubeLab) -> None:
    _app(primary)
    follower = Follower(store, primary)
    try:
        standby = _standby(store, standby_target)
        _hydrated(standby, lambda: "cm-4" in _configmaps(standby_target), "the full on the standby")
        before = {link.backup_id for link in standby.watcher.links.values()}
        newest = max(link.stored for link in standby.watcher.links.values() if link.stored)
        _core(primary).patch_namespaced_config_map("cm-3", NS, {"data": {"v": "tampered"}})
        wait_for(lambda: (standby.watcher.poll({}), set(standby.watcher.links) - before)[1], "a new delta")
        follower.stop()
        # damage every pack the store received after the link the standby had: the new delta's data
        damaged = 0
        for name, stored in store.backend.list_timed("packs/"):
            if stored > newest:
                blob = store.backend.get(name)
                store.backend.put(name, bytes(len(blob)))
                damaged += 1
        assert damaged
        fresh = _standby(Repository.open(open_backend(store.backend.url), _owner()), standby_target)
        done = fresh.round()
        assert done.skipped and all("authentic" in why for why in done.skipped.values())
        assert _configmaps(standby_target)["cm-3"] == {"v": "1"}  # the change it carried was not applied
        assert set(done.skipped) <= set(_record(standby_target)["skipped"])
    finally:
        follower.stop()


def test_a_standby_killed_mid_apply_resumes_without_duplicates(
    store: Repository, seeded_primary: KubeLab, standby_target: KubeLab, tmp_path: Path
) -> None:
    primary = seeded_primary
    _app(primary, configmaps=40, namespace=RESUMED)
    follower = Follower(store, primary)
    try:
        wait_for(lambda: FollowSession(store, PLUGIN, SET).tip(), "the full in the store")
    finally:
        follower.stop()
    argv = [sys.executable, "-m", "drtool", "--store", store.backend.url, "standby", "--set", SET]
    argv += ["--target", standby_target.kubeconfig, "-p", PLUGIN, "--once"]
    env = {**os.environ, "DRTOOL_PASSPHRASE": PASSPHRASE, "DRTOOL_CATALOG": str(tmp_path / "catalog.db")}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: _safe_record(standby_target).get("applying"), "the standby applying the full", 120)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    killed = _record(standby_target)
    assert killed["applying"] is not None and killed["applied"] == 0  # killed mid-apply
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming" in done.stdout
    record = _record(standby_target)
    assert record["applying"] is None and record["applied"] == 1  # the link counted once
    source, target = _configmaps(primary, RESUMED), _configmaps(standby_target, RESUMED)
    assert source == target and len(target) == 40


def _safe_record(target: KubeLab) -> dict[str, Any]:
    record = StateStore(target.kubeconfig, SET).read()
    return record.to_json() if record else {}


def _owner() -> Any:
    from drtool.crypto.credentials import Credentials

    return Credentials(passphrase=PASSPHRASE)


# --- failback -------------------------------------------------------------------------------------


def test_failback_swaps_the_roles(
    store: Repository, primary: KubeLab, standby_target: KubeLab, lab_root: Path, request: pytest.FixtureRequest
) -> None:
    """Fail over to the standby, back it up as set prod-b, hydrate a rebuilt old site from it, fail back."""
    standby = _hydrated_standby(store, primary, standby_target)
    url = primary.apiserver.url
    primary.lab.down()
    failover(store, standby, primary=[url])
    _core(standby_target).patch_namespaced_config_map("cm-0", NS, {"data": {"v": "served by the standby"}})
    rebuilt = start_kube_lab(lab_root, lab_name("old", request))
    back = Follower(store, standby_target, "prod-b")
    try:
        old_site = _standby(store, rebuilt, backup_set="prod-b")
        _hydrated(old_site, lambda: "cm-4" in _configmaps(rebuilt), "the new primary's full on the old site")
        assert _apps(rebuilt).read_namespaced_deployment("web", NS).spec.replicas == 0  # held there now
        result = failback(store, old_site, lift=SET, drain_s=3.0)
        assert result.ok and result.forced  # planned: the current primary answers by design
        assert _configmaps(rebuilt)["cm-0"] == {"v": "served by the standby"}
        assert _apps(rebuilt).read_namespaced_deployment("web", NS).spec.replicas == 2
        refuse_if_fenced(store, SET)  # lifted: the old site backs up under its set again
        with pytest.raises(Fenced):
            refuse_if_fenced(store, "prod-b")
    finally:
        back.stop()
        rebuilt.lab.down()
