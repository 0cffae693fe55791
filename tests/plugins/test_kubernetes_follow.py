"""Kubernetes continuous backup on a real kube-apiserver: the follower's deltas, a kill -9 and a restart,
point-in-time restores and folds of the chain, and a warm standby hydrated from it.

Each test starts its own source control plane (etcd + kube-apiserver) and writes to it through the official
``kubernetes`` client; restores and the standby go to another fresh one (``kube_target``). The chain is read
back through the store, link by link, not through the follower's own state.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.kube_seed import KubeClient as SeedClient
from drtool_lab.kube_seed import install_crds
from kubernetes import client

from drtool.backends.local import LocalBackend
from drtool.compact import compact
from drtool.crypto.credentials import Credentials
from drtool.follow import FollowSession
from drtool.kube.artifacts import records, types_in
from drtool.kube.deltas import DEL, PUT, Event, is_delta, read_delta
from drtool.kube.holds import HELD
from drtool.kube.objects import object_key
from drtool.kube.pointview import PointView
from drtool.kube.skips import STANDBY_NAMESPACE
from drtool.kube.standby import parse_id
from drtool.plugin.contract import StandbyOptions, StandbyState
from drtool.plugin.manager import get_plugin
from drtool.points import Point, parse_time
from drtool.repo.chains import find_point, read_links
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.restore import run_restore
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.kube import KubeLab, lab_name, start_kube_lab, wait_for
from tests.plugins.test_etcd_follow import InProcessFollower

plugin = get_plugin("kubernetes")
SECRET_VALUE = "hunter2-follow-secret"


@pytest.fixture
def source(lab_root: Path, request: pytest.FixtureRequest) -> Iterator[KubeLab]:
    """A fresh control plane the test writes to (the session's seeded ``kube_source`` is read-only)."""
    kube = start_kube_lab(lab_root, lab_name("follow", request))
    yield kube
    kube.lab.down()


def follower(repo: Repository, kube: KubeLab) -> InProcessFollower:
    return InProcessFollower(repo, {"kubeconfig": kube.kubeconfig}, plugin)


def links(repo: Repository, name: str = "kubernetes") -> list[Any]:
    return sorted(read_links(repo, name), key=lambda link: (link.base, link.seq, link.kind))


def chain_events(repo: Repository, name: str = "kubernetes") -> list[Event]:
    """Every event of every delta in the store, in chain order."""
    out: list[Event] = []
    for link in links(repo, name):
        ctx = PluginRestoreContext(repo, link.manifest, name)
        if is_delta(ctx):
            out += list(read_delta(ctx)[1])
    return out


def wait_event(repo: Repository, op: str, type_key: str, key: str, plugin: str = "kubernetes") -> Event:
    """Until a durable delta holds this change (the follower's own buffer does not count)."""

    def found() -> Event | None:
        return next((e for e in chain_events(repo, plugin) if (e.op, e.type, e.key) == (op, type_key, key)), None)

    return wait_for(found, f"a delta with {op} {type_key} {key}")


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def config_map(name: str, value: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"v": value}}


def test_follow_writes_each_change_within_seconds_and_restore_at_gives_that_moment(
    repo: Repository, source: KubeLab, kube_target: KubeLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    follows = follower(repo, source)
    wait_for(lambda: follows.session.tip(), "the chain's full backup")
    with source.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "team"}})
        core.create_namespaced_config_map("team", config_map("a", "1"))
        core.create_namespaced_secret("team", {"metadata": {"name": "s"}, "stringData": {"token": SECRET_VALUE}})
        written = time.monotonic()
        wait_event(repo, PUT, "secrets", "team/s")
        lag = time.monotonic() - written
        moment = now_text()  # the chain holds a=1 and the Secret, nothing after
        time.sleep(0.05)
        core.patch_namespaced_config_map("a", "team", {"data": {"v": "2"}})
        core.create_namespaced_config_map("team", config_map("b", "1"))
        core.delete_namespaced_secret("s", "team")
        wait_event(repo, DEL, "secrets", "team/s")
        wait_event(repo, PUT, "configmaps", "team/b")
    follows.stop()
    assert lag < 30, f"a change took {lag:.1f}s to reach a durable delta"

    events = [(e.op, e.type, e.key) for e in chain_events(repo) if e.key.startswith("team/") or e.key == "team"]
    assert events.count((PUT, "configmaps", "team/a")) == 2, events
    assert events.count((DEL, "secrets", "team/s")) == 1, events
    assert all(SECRET_VALUE.encode() not in f.read_bytes() for f in tmp_path.rglob("*") if f.is_file())
    assert SECRET_VALUE not in caplog.text

    outcome = run_restore(
        repo, find_point(repo, "kubernetes", "latest", moment), plugin, {"kubeconfig": kube_target.kubeconfig}
    )
    assert outcome.verified, [c for c in outcome.checks if not c.ok]
    assert outcome.result.details["recovery_point"] <= moment
    with kube_target.api_client() as api:
        core = client.CoreV1Api(api)
        assert core.read_namespaced_config_map("a", "team").data == {"v": "1"}
        assert core.read_namespaced_secret("s", "team").data  # deleted in the source only after the point
        names = {cm.metadata.name for cm in core.list_namespaced_config_map("team").items}
        assert "b" not in names, "a restore at T holds nothing written after T"

    folded = compact(repo, plugin)
    assert folded.manifest is not None and folded.deltas >= 2
    full = links(repo)[0]
    expected = _records(PluginRestoreContext(repo, full.manifest, "kubernetes"))
    for e in chain_events(repo):  # the chain replayed the plainest way: last write wins, deletions remove
        if e.op == PUT:
            expected.setdefault(e.type, {})[e.key] = e.record
        elif e.op == DEL:
            expected.get(e.type, {}).pop(e.key, None)
    got = _records(PluginRestoreContext(repo, folded.manifest, "kubernetes"))
    assert got == {key: objs for key, objs in expected.items() if objs}
    assert got["configmaps"]["team/a"]["object"]["data"] == {"v": "2"} and "team/b" in got["configmaps"]
    assert "team/s" not in got.get("secrets", {})


def _records(ctx: Any) -> dict[str, dict[str, Any]]:
    """type -> key -> record of a full backup (or a point view of a chain); types without objects left out."""
    out = {t.key: {object_key(r["object"]): r for r in records(ctx, t)} for t in types_in(ctx)}
    return {key: objs for key, objs in out.items() if objs}


def configure(cli: Cli, tmp_path: Path, kube: KubeLab) -> Repository:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    sources = {"kubernetes": {"kubeconfig": kube.kubeconfig}}
    config.write_text(yaml.safe_dump({"store": str(tmp_path / "store"), "sources": sources}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    return Repository.open(LocalBackend(tmp_path / "store"), Credentials(passphrase=PASSPHRASE))


def chain_tip(repo: Repository) -> Any:
    tip = FollowSession(repo, "kubernetes", "follow").tip()
    return tip.link if tip else None


class Load:
    """ConfigMaps created (and every third one updated) in namespace ``load`` as fast as the server takes them."""

    def __init__(self, kube: KubeLab) -> None:
        self.api = kube.api_client()
        self.core = client.CoreV1Api(self.api)
        self.core.create_namespace({"metadata": {"name": "load"}})
        self.created: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            name = f"cm-{i}"
            self.core.create_namespaced_config_map("load", config_map(name, "0"))
            self.created.append(name)
            if i % 3 == 2:
                self.core.patch_namespaced_config_map(f"cm-{i - 1}", "load", {"data": {"v": "1"}})
            i += 1
            time.sleep(0.05)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=60)
        self.api.close()


def test_kill_9_mid_follow_then_a_restart_continue_the_chain_without_loss_or_duplicates(
    cli: Cli, tmp_path: Path, source: KubeLab
) -> None:
    repo = configure(cli, tmp_path, source)
    proc = cli.popen("follow", "-p", "kubernetes", "--period", "1")
    load: Load | None = None
    try:
        wait_for(lambda: chain_tip(repo), "the chain's full backup", 120)
        load = Load(source)
        wait_for(lambda: (chain_tip(repo).seq >= 2) or None, "two deltas")
        proc.kill()  # kill -9: its buffer dies with it; the API server still has those resourceVersions
        proc.wait()
        killed_at = chain_tip(repo).seq
        proc = cli.popen("follow", "-p", "kubernetes", "--period", "1")
        wait_for(lambda: (chain_tip(repo).seq >= killed_at + 2) or None, "two deltas after the restart")
        load.stop()
        last = load.created[-1]
        wait_event(repo, PUT, "configmaps", f"load/{last}")
        proc.send_signal(signal.SIGTERM)  # flush, then exit 0
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if load is not None:
            load.stop()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    chain = links(repo)
    assert [link.kind for link in chain].count("full") == 1, "a restarted follower continues its chain"
    assert [d.seq for d in chain if d.is_delta] == list(range(1, len(chain)))
    events = chain_events(repo)
    seen = [(e.type, e.key, e.rv) for e in events if e.op == PUT]
    assert len(seen) == len(set(seen)), "no change is written twice"
    state = {e.key: e.record for e in events if e.op == PUT and e.key.startswith("load/")}
    with source.api_client() as api:
        live = {
            f"load/{cm.metadata.name}": cm.data for cm in client.CoreV1Api(api).list_namespaced_config_map("load").items
        }
    assert {k: r["object"].get("data") for k, r in state.items() if k != "load/kube-root-ca.crt"} == {
        k: v for k, v in live.items() if k != "load/kube-root-ca.crt"
    }, "every change made while the follower was killed is in the chain"


def test_the_full_records_the_failure_domain_and_the_standby_namespace_is_never_followed(
    repo: Repository, source: KubeLab
) -> None:
    """`drtool failover` finds the primary to probe in the full's facts; a standby's own record (a failover
    turns a standby into a primary that is followed) stays out of the full and of every delta."""
    with source.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": STANDBY_NAMESPACE}})
        core.create_namespaced_config_map(STANDBY_NAMESPACE, config_map("standby-prod", "before"))
        core.create_namespace({"metadata": {"name": "team"}})
        core.create_namespaced_config_map("team", config_map("early", "1"))
        follows = follower(repo, source)
        wait_for(lambda: follows.session.tip(), "the chain's full backup")
        core.patch_namespaced_config_map("standby-prod", STANDBY_NAMESPACE, {"data": {"v": "after"}})
        core.create_namespaced_config_map(STANDBY_NAMESPACE, config_map("standby-prod-part", "1"))
        core.create_namespaced_config_map("team", config_map("marker", "1"))
        wait_event(repo, PUT, "configmaps", "team/marker")
    follows.stop()
    full = links(repo)[0].manifest
    assert full.failure_domain["kubernetes_api_endpoints"] == [source.apiserver.url]
    assert full.failure_domain["kubernetes_api_hosts"]
    held = _records(PluginRestoreContext(repo, full, "kubernetes"))
    assert "team" in held["namespaces"] and STANDBY_NAMESPACE not in held["namespaces"]
    assert [k for k in held["configmaps"] if k.endswith("/early") or k.startswith(STANDBY_NAMESPACE)] == ["team/early"]
    followed = [(e.op, e.type, e.key) for e in chain_events(repo)]
    assert (PUT, "configmaps", "team/marker") in followed
    assert not [e for e in followed if STANDBY_NAMESPACE in (e[2], e[2].split("/")[0])], followed


def hydrate_chain(
    repo: Repository, target: KubeLab, state: StandbyState, options: StandbyOptions, name: str = "kubernetes"
) -> list[Any]:
    """What `drtool standby` does per link, with the state persisted as JSON between links: each outcome."""
    outcomes = []
    for link in links(repo, name):
        if link.seq <= state.seq and link.base == state.chain:
            continue
        ctx = PluginRestoreContext(repo, link.manifest, name)
        out = get_plugin(name).hydrate(ctx, {"kubeconfig": target.kubeconfig}, state, options)
        state = StandbyState.from_json(json.loads(json.dumps(out.state.to_json())))
        state.chain, state.seq, state.link = link.base, link.seq, link.backup_id
        outcomes.append((link, out, state))
    return outcomes


def _job(name: str) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.example/train:1"}]}
    return {"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": {"spec": pod}}}


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    pod = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod},
    }


def target_versions(kube: KubeLab, state: StandbyState) -> dict[str, str]:
    """The standby's resourceVersion of every object the state tracks, read with the official client."""
    dyn = kube.dynamic(readonly=True)
    out = {}
    for oid in state.objects:
        t, name, ns = parse_id(oid)
        api = dyn.resources.get(api_version=t.api_version, name=t.resource)
        out[oid] = api.get(name=name, namespace=ns).metadata.resourceVersion
    return out


def test_a_standby_hydrated_link_by_link_holds_workloads_defers_deletions_and_reapplies_as_a_no_op(
    repo: Repository, source: KubeLab, kube_target: KubeLab
) -> None:
    follows = follower(repo, source)
    wait_for(lambda: follows.session.tip(), "the chain's full backup")
    with source.api_client() as api:
        core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": "team"}})
        apps.create_namespaced_deployment("team", _deployment("web", 3))
        batch.create_namespaced_job("team", _job("train"))
        core.create_namespaced_config_map("team", config_map("doomed", "1"))
        wait_event(repo, PUT, "configmaps", "team/doomed")
        core.delete_namespaced_config_map("doomed", "team")
        wait_event(repo, DEL, "configmaps", "team/doomed")
    follows.stop()

    hold_first = StandbyOptions(delete_after=3600)
    first = hydrate_chain(repo, kube_target, StandbyState("kubernetes"), hold_first)
    state = first[-1][2]
    with kube_target.api_client() as api:
        core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
        web = apps.read_namespaced_deployment("web", "team")
        assert web.spec.replicas == 0 and json.loads(web.metadata.annotations[HELD]) == {"spec.replicas": 3}
        assert batch.read_namespaced_job("train", "team").spec.suspend is True
        assert core.read_namespaced_config_map("doomed", "team"), "a deletion waits delete_after before the standby"
    doomed = "configmaps/v1 team/doomed"
    assert doomed in state.deferred and first[-1][1].deferred >= 1
    assert {"deployments.apps/v1 team/web", "jobs.batch/v1 team/train"} <= set(state.held)

    before = target_versions(kube_target, state)
    replay = StandbyState.from_json(state.to_json())
    replay.seq = -1  # every link applied a second time onto the state it produced
    twice = hydrate_chain(repo, kube_target, replay, hold_first)
    assert all(out.created == 0 and out.updated == 0 for _, out, _ in twice), [
        (o.created, o.updated) for _, o, _ in twice
    ]
    crashed = first[0][2]  # killed while applying the deltas: restarted from the state persisted after the full
    redo = hydrate_chain(repo, kube_target, crashed, hold_first)
    assert len(redo) == len(first) - 1
    assert target_versions(kube_target, state) == before, "a link applied again writes nothing"
    again = redo[-1][2]
    assert (set(again.objects), again.held, again.deferred) == (set(state.objects), state.held, state.deferred)
    with kube_target.api_client() as api:
        names = [d.metadata.name for d in client.AppsV1Api(api).list_namespaced_deployment("team").items]
    assert names == ["web"], "nothing duplicated"

    seen = dt.datetime.fromisoformat(state.deferred[doomed].seen.replace("Z", "+00:00"))
    early = plugin.settle(
        {"kubeconfig": kube_target.kubeconfig},
        state,
        StandbyOptions(3600, now=_text(seen + dt.timedelta(seconds=3599))),
    )
    assert early.deleted == 0 and doomed in early.state.deferred
    due = plugin.settle(
        {"kubeconfig": kube_target.kubeconfig},
        state,
        StandbyOptions(3600, now=_text(seen + dt.timedelta(seconds=3601))),
    )
    assert due.deleted == 1 and doomed not in due.state.deferred
    with kube_target.api_client() as api:
        names = {cm.metadata.name for cm in client.CoreV1Api(api).list_namespaced_config_map("team").items}
    assert "doomed" not in names

    released = plugin.release({"kubeconfig": kube_target.kubeconfig}, due.state)
    assert released.released >= 2 and not released.state.held and not released.failed
    with kube_target.api_client() as api:
        assert client.AppsV1Api(api).read_namespaced_deployment("web", "team").spec.replicas == 3
        assert not client.BatchV1Api(api).read_namespaced_job("train", "team").spec.suspend


def _text(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_kueue_follow_writes_its_config_kinds_and_a_point_in_time_view_replays_them(
    repo: Repository, source: KubeLab
) -> None:
    install_crds(SeedClient(source.apiserver.access()), ["kueue"])
    kueue = get_plugin("kueue")
    follows = InProcessFollower(repo, {"kubeconfig": source.kubeconfig}, kueue)
    wait_for(lambda: follows.session.tip(), "the chain's full backup")
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    with source.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", {**flavor, "spec": {}})
        put = wait_event(repo, PUT, "resourceflavors.kueue.x-k8s.io", "gpu", plugin="kueue")
        custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", "gpu")
        gone = wait_event(repo, DEL, "resourceflavors.kueue.x-k8s.io", "gpu", plugin="kueue")
    follows.stop()
    chain = links(repo, "kueue")
    full = chain[0]
    assert full.manifest.failure_domain["kubernetes_api_endpoints"] == [source.apiserver.url], "failover's probe"
    deltas = [d.manifest for d in chain if d.is_delta]
    at = parse_time(put.at)
    before = PointView(PluginRestoreContext(repo, full.manifest, "kueue", deltas=deltas, point=Point(time=at)))
    assert "gpu" in _records(before).get("resourceflavors.kueue.x-k8s.io", {})
    after = PointView(PluginRestoreContext(repo, full.manifest, "kueue", deltas=deltas, point=Point()))
    assert "gpu" not in _records(after).get("resourceflavors.kueue.x-k8s.io", {}), gone


KUEUE = ("kueue.x-k8s.io", "v1beta2")


def test_a_kueue_chain_hydrates_a_standby_with_its_flavors_and_queues(
    repo: Repository, source: KubeLab, kube_target: KubeLab
) -> None:
    """`drtool follow -p kueue` on the source, its links applied to another cluster the way `drtool standby`
    does: what the full held and what the deltas changed reach the standby (with Kueue's CRDs, from the full),
    a deleted LocalQueue stays until ``delete_after``."""
    install_crds(SeedClient(source.apiserver.access()), ["kueue"])
    with source.api_client() as api:
        custom = client.CustomObjectsApi(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "team"}})
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", _kueue("ResourceFlavor", "cpu", {}))
        follows = InProcessFollower(repo, {"kubeconfig": source.kubeconfig}, get_plugin("kueue"))
        wait_for(lambda: follows.session.tip(), "the chain's full backup")
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", _kueue("ResourceFlavor", "gpu", {}))
        quota = {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
        group = {"coveredResources": ["nvidia.com/gpu"], "flavors": [quota]}
        spec = {"namespaceSelector": {}, "resourceGroups": [group]}
        custom.create_cluster_custom_object(*KUEUE, "clusterqueues", _kueue("ClusterQueue", "train", spec))
        for name in ("main", "scratch"):
            queue = _kueue("LocalQueue", name, {"clusterQueue": "train"})
            custom.create_namespaced_custom_object(*KUEUE, "team", "localqueues", queue)
        wait_event(repo, PUT, "localqueues.kueue.x-k8s.io", "team/scratch", plugin="kueue")
        custom.delete_namespaced_custom_object(*KUEUE, "team", "localqueues", "scratch")
        wait_event(repo, DEL, "localqueues.kueue.x-k8s.io", "team/scratch", plugin="kueue")
    follows.stop()

    outcomes = hydrate_chain(repo, kube_target, StandbyState("kueue"), StandbyOptions(delete_after=3600), "kueue")
    assert len(outcomes) >= 2 and not any(out.failed for _, out, _ in outcomes), [o.failed for _, o, _ in outcomes]
    with kube_target.api_client() as api:
        custom = client.CustomObjectsApi(api)
        flavor_items = custom.list_cluster_custom_object(*KUEUE, "resourceflavors")["items"]
        queue = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "train")
        locals_ = custom.list_namespaced_custom_object(*KUEUE, "team", "localqueues")["items"]
    flavors, local = {f["metadata"]["name"] for f in flavor_items}, {q["metadata"]["name"] for q in locals_}
    assert flavors == {"cpu", "gpu"}
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 8
    assert local == {"main", "scratch"}, "a deletion waits delete_after before it reaches the standby"
    assert "localqueues.kueue.x-k8s.io/v1beta2 team/scratch" in outcomes[-1][2].deferred


def _kueue(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "/".join(KUEUE), "kind": kind, "metadata": {"name": name}, "spec": spec}
