"""etcd continuous backup on a real etcd: the follower's deltas and point-in-time restores from them.

Each test writes to its own scratch etcd (real, single member), follows it into a real local store, and
restores into a NEW etcd member that verify then compares key by key with the source at the restored
revision (the source still has those revisions: nothing here compacts unless the test says so).
Writes and read-backs go through plain requests/etcdctl (tests/fixtures), not the plugin's client.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.etcd_seed import gateway, settings_of
from drtool_plugins.etcd import EtcdPlugin
from drtool_plugins.etcd.deltas import ARTIFACT, Op, Revision, header

from drtool.backends.local import LocalBackend
from drtool.compact import compact
from drtool.crypto.credentials import Credentials
from drtool.errors import DrtoolError, IntegrityError, UsageError
from drtool.follow import FollowSession, run_follow
from drtool.plans.executor import Executor
from drtool.plans.loader import load_plan
from drtool.plans.schema import Source
from drtool.plans.source import find_backup
from drtool.plugin.contract import Span
from drtool.rehearsal.rehearse import rpo
from drtool.rehearsal.target import stop_restored_servers
from drtool.repo.chains import ChainGap, find_point, read_links
from drtool.repo.manifest import Manifest, PluginOutcome
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.retention import BackupRef, ChainPosition, RetentionPolicy, decide
from drtool.scheduler.sets import parse_backup_sets
from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error, count_manifest_reads
from tests.fixtures.etcd import etcdctl_dump
from tests.fixtures.noise import noise

plugin = EtcdPlugin()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def put(settings: Mapping[str, Any], key: str, value: bytes, lease: int = 0) -> int:
    body: dict[str, Any] = {"key": b64(key.encode()), "value": b64(value)}
    if lease:
        body["lease"] = lease
    return int(gateway(settings, "/v3/kv/put", body)["header"]["revision"])


def txn(settings: Mapping[str, Any], items: dict[str, bytes]) -> int:
    ops = [{"request_put": {"key": b64(k.encode()), "value": b64(v)}} for k, v in items.items()]
    return int(gateway(settings, "/v3/kv/txn", {"success": ops})["header"]["revision"])


def delete(settings: Mapping[str, Any], key: str, prefix: bool = False) -> int:
    body = {"key": b64(key.encode())}
    if prefix:
        end = bytearray(key.encode())
        end[-1] += 1
        body["range_end"] = b64(bytes(end))
    return int(gateway(settings, "/v3/kv/deleterange", body)["header"]["revision"])


def revision(settings: Mapping[str, Any]) -> int:
    return int(gateway(settings, "/v3/maintenance/status", {})["header"]["revision"])


class InProcessFollower:
    """``drtool follow`` in a thread of the test process (stop = what SIGTERM does); etcd's unless ``follows``
    names another plugin (tests/plugins/test_kubernetes_follow.py)."""

    def __init__(self, repo: Repository, source: Mapping[str, Any], follows: Any = plugin, **options: Any) -> None:
        self.plugin = follows
        self.session = FollowSession(repo, follows.name, "follow", {"period": 1.0, "idle": 5.0, **options})
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(repo, source), daemon=True)
        self.thread.start()

    def _run(self, repo: Repository, source: Mapping[str, Any]) -> None:
        try:
            run_follow(repo, self.plugin, source, self.session)
        except BaseException as exc:
            self.error = exc

    def wait_for(self, predicate: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tip = self.session.tip()
            if tip is not None and predicate(tip.link):
                return
            time.sleep(0.2)
        raise AssertionError("the follower did not get there in time")

    def stop(self) -> None:
        self.session.stop.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


@pytest.fixture
def follower(repo: Repository, etcd_scratch: EtcdServer) -> Iterator[Any]:
    started: list[InProcessFollower] = []

    def start(**options: Any) -> InProcessFollower:
        f = InProcessFollower(repo, settings_of(etcd_scratch), **options)
        started.append(f)
        return f

    yield start
    for f in started:
        with contextlib.suppress(Exception):
            f.stop()


@pytest.fixture
def restore_at_repo(tmp_path: Path, lab_root: Path, stop_restored: list[Any]) -> Any:
    """Restore ``repo`` at a point into a new started member; with ``source``, verify compares every key."""
    counter = iter(range(100))

    def restore(repo: Repository, at: Any, source: EtcdServer | None = None, **options: Any) -> Any:
        n = next(counter)
        target: dict[str, Any] = {
            "data_dir": str(tmp_path / f"pitr-{n}" / "data"),
            "name": f"pitr-{n}",
            "start": True,
            "lab_dir": str(lab_root / f"pitr-{tmp_path.name}-{n}"),
        }
        if source is not None:
            target["compare_with"] = settings_of(source)
        outcome = run_restore(repo, find_point(repo, "etcd", "latest", at), plugin, target, options=options)
        stop_restored.append(outcome.result.details)
        return outcome

    return restore


@pytest.fixture
def restore_at(repo: Repository, restore_at_repo: Any) -> Any:
    return lambda at, source=None, **options: restore_at_repo(repo, at, source, **options)


def test_pitr_to_a_revision_in_the_middle_of_a_transaction_burst(
    repo: Repository, etcd_scratch: EtcdServer, follower: Any, restore_at: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = settings_of(etcd_scratch)
    for i in range(50):
        put(src, f"/registry/pods/ns/p{i}", noise(64, i))
    f = follower()
    f.wait_for(lambda link: link.kind == "full")
    revs = [txn(src, {f"/burst/{r}/{k}": f"{r}-{k}".encode() * 10 for k in range(20)}) for r in range(30)]
    delete(src, "/registry/pods/ns/p1", prefix=True)  # p1, p10..p19: one revision, many deletes
    put(src, "/big", noise(1024 * 1024))
    end = revision(src)
    f.wait_for(lambda link: link.kind == "delta" and link.last >= end)
    f.stop()

    middle = revs[14]
    reads = count_manifest_reads(repo, monkeypatch)
    outcome = restore_at(str(middle), etcd_scratch)
    assert outcome.verified, [c for c in outcome.checks if not c.ok]
    assert set(reads.values()) == {1}, "the chain is resolved once: each manifest read once, then passed on"
    point = outcome.result.details["point_in_time"]
    assert point["revision"] == middle
    restored = EtcdServer.from_state(dict(outcome.result.details["server"]))
    assert etcdctl_dump(settings_of(restored), middle) == etcdctl_dump(src, middle)

    latest = restore_at("latest", etcd_scratch)
    assert latest.verified and latest.result.details["point_in_time"]["revision"] == end


def test_a_missing_delta_is_refused_naming_the_revisions(
    repo: Repository, etcd_scratch: EtcdServer, follower: Any, restore_at: Any
) -> None:
    src = settings_of(etcd_scratch)
    f = follower(period=0.5)
    f.wait_for(lambda link: link.kind == "full")
    for i in range(6):
        written = put(src, f"/k{i}", b"v")
        f.wait_for(lambda link, written=written: link.last >= written)  # one delta each, whatever the load
    end = revision(src)
    f.wait_for(lambda link: link.last >= end)
    f.stop()
    manifests = (repo.get_manifest(i) for i in repo.backup_ids())
    deltas = sorted((m for m in manifests if m.is_delta), key=lambda m: m.chain.seq)  # ids of one second sort at random
    assert len(deltas) >= 3
    victim = deltas[1]
    assert victim.chain is not None
    repo.delete_manifest(victim.id)
    with pytest.raises(ChainGap) as refused:
        restore_at(str(end))
    assert f"{victim.chain.first}..{victim.chain.last}" in refused.value.message
    before = restore_at(str(victim.chain.first - 1), etcd_scratch)  # a point before the gap still restores
    assert before.verified


def test_plan_steps_restore_points_of_the_chain_reading_each_manifest_once(
    repo: Repository, etcd_scratch: EtcdServer, follower: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan step with ``with: {at: ...}`` restores a point of the chain the plan's backup belongs to. The
    run resolves the chain once for all its steps: every manifest is read once, the plan's own not again."""
    src = settings_of(etcd_scratch)
    f = follower(period=0.5)
    f.wait_for(lambda link: link.kind == "full")
    first = put(src, "/plan/a", b"1")
    f.wait_for(lambda link: link.last >= first)  # the two points in two deltas
    end = put(src, "/plan/b", b"2")
    f.wait_for(lambda link: link.last >= end)
    f.stop()
    steps = "".join(
        f"  - id: {name}\n    uses: etcd\n    with: {{at: '{at}'}}\n"
        f"    target: {{data_dir: '{tmp_path / name}/data', name: {name}, start: true, lab_dir: '{tmp_path / name}'}}\n"
        for name, at in (("newest", "latest"), ("earlier", first))
    )
    plan = tmp_path / "points.yaml"
    plan.write_text(f"name: points\nsteps:\n{steps}")
    reads = count_manifest_reads(repo, monkeypatch)
    try:
        read: list[Manifest] = []  # the deltas newer than the newest full are read to choose it
        run = Executor(load_plan(plan), repo, find_backup(repo, Source(), read=read), read=read).execute()
    finally:
        stop_restored_servers(tmp_path)
    assert run.ok, [(s.id, s.error) for s in run.steps.values()]
    newest, earlier = run.steps["newest"], run.steps["earlier"]
    assert f"(revision {end} as of" in newest.summary and f"(revision {first} as of" in earlier.summary
    assert newest.recovery_point > earlier.recovery_point > ""  # the rehearsal's RPO is measured from these
    assert len(reads) == len(repo.backup_ids()) >= 3 and set(reads.values()) == {1}, reads


def test_errors_are_typed(restore_at: Any) -> None:
    with pytest.raises(DrtoolError):
        restore_at("not a time")
    assert issubclass(ChainGap, IntegrityError)


# --- a follower process, killed and signalled ------------------------------------------------------


class Load:
    """A steady writer in a thread: puts (some with a lease), overwrites and deletes, until stopped.

    A write that fails while etcd is down is retried, so the source's history is whatever etcd accepted.
    """

    def __init__(self, settings: Mapping[str, Any], rate: float = 100.0) -> None:
        self.settings, self.rate = settings, rate
        self.stop_event = threading.Event()
        self.written = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop_event.wait(1 / self.rate):
            with contextlib.suppress(Exception):
                if i % 10 == 9:
                    delete(self.settings, f"/load/{i - 5}")
                else:
                    put(self.settings, f"/load/{i % 400}", noise(256, i))
                self.written += 1
                i += 1

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join()


def configure(cli: Cli, tmp_path: Path, source: Mapping[str, Any]) -> Repository:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"store": str(tmp_path / "store"), "sources": {"etcd": dict(source)}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    return Repository.open(LocalBackend(tmp_path / "store"), Credentials(passphrase=PASSPHRASE))


def chain_tip(repo: Repository) -> Any:
    tip = FollowSession(repo, "etcd", "follow").tip()
    return tip.link if tip else None


def wait_tip(repo: Repository, predicate: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tip = chain_tip(repo)
        if tip is not None and predicate(tip):
            return tip
        time.sleep(0.3)
    raise AssertionError(f"the chain did not get there in time (tip {chain_tip(repo)})")


def links(repo: Repository) -> list[Any]:
    return sorted(read_links(repo, "etcd"), key=lambda link: (link.base, link.seq, link.kind))


def follow_cli(cli: Cli, *extra: str) -> subprocess.Popen[str]:
    return cli.popen("follow", "-p", "etcd", "--period", "1", "-o", "idle=5", *extra)


def test_kill_9_of_the_follower_then_sigterm_continue_the_chain_without_gap(
    cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer, restore_at_repo: Any
) -> None:
    src = settings_of(etcd_scratch)
    repo = configure(cli, tmp_path, src)
    load = Load(src)
    try:
        proc = follow_cli(cli)
        wait_tip(repo, lambda link: link.kind == "delta" and link.seq >= 2)
        proc.kill()  # kill -9: the buffer dies with it; etcd still has those revisions
        proc.wait()
        killed_at = chain_tip(repo)
        time.sleep(2)
        proc = follow_cli(cli)
        wait_tip(repo, lambda link: link.seq >= killed_at.seq + 2)
        load.stop()
        end = revision(src)
        # durable first: a stop takes no more from the watch, and under load its last events can still be queued
        wait_tip(repo, lambda link: link.last >= end)
        proc.send_signal(signal.SIGTERM)  # flush, then exit 0
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        load.stop()
    tip = chain_tip(repo)
    assert tip.last == end
    chain = links(repo)
    assert [link.kind for link in chain].count("full") == 1, "a restarted follower continues its chain"
    deltas = [link for link in chain if link.is_delta]
    assert [d.seq for d in deltas] == list(range(1, len(deltas) + 1))
    assert all(b.first == a.last + 1 for a, b in itertools.pairwise(deltas))
    outcome = restore_at_repo(repo, "latest", etcd_scratch)
    assert outcome.verified, [c for c in outcome.checks if not c.ok]
    assert outcome.result.details["point_in_time"]["revision"] == end


def test_kill_9_of_etcd_and_a_restart_mid_stream(
    cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer, restore_at_repo: Any
) -> None:
    src = settings_of(etcd_scratch)
    repo = configure(cli, tmp_path, src)
    load = Load(src)
    proc = follow_cli(cli)
    try:
        wait_tip(repo, lambda link: link.kind == "delta")
        os.kill(etcd_scratch.pid or 0, signal.SIGKILL)  # etcd dies mid-stream
        etcd_scratch.pid = None
        time.sleep(2)
        etcd_scratch.start()  # same data dir: what etcd acknowledged is still there
        before = chain_tip(repo).seq
        wait_tip(repo, lambda link: link.seq >= before + 2)
        etcd_scratch.stop()  # and a clean restart
        etcd_scratch.start()
        before = chain_tip(repo).seq
        wait_tip(repo, lambda link: link.seq >= before + 2)
        load.stop()
        end = revision(src)
        wait_tip(repo, lambda link: link.last >= end)
    finally:
        load.stop()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    chain = links(repo)
    assert [link.kind for link in chain].count("full") == 1
    metas = [repo.get_manifest(link.backup_id).plugins["etcd"].meta for link in chain if link.is_delta]
    assert sum(m["reconnects"] for m in metas) >= 2, "the reconnects are recorded in the deltas"
    outcome = restore_at_repo(repo, str(end), etcd_scratch)
    assert outcome.verified, [c for c in outcome.checks if not c.ok]


def test_compaction_past_the_watch_starts_a_new_chain_and_the_gap_is_refused(
    cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer, restore_at_repo: Any
) -> None:
    src = settings_of(etcd_scratch)
    repo = configure(cli, tmp_path, src)
    proc = follow_cli(cli)
    put(src, "/a", b"1")
    first_end = put(src, "/b", b"2")
    wait_tip(repo, lambda link: link.last >= first_end)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    missed = [put(src, f"/missed/{i}", b"x") for i in range(5)]
    gateway(src, "/v3/kv/compaction", {"revision": missed[-1], "physical": True})  # past the chain's tip
    proc = follow_cli(cli)
    after = put(src, "/c", b"3")
    wait_tip(repo, lambda link: link.last >= after)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    fulls = [link for link in links(repo) if link.kind == "full"]
    assert len(fulls) == 2 and fulls[0].base != fulls[1].base, "a compaction past the tip starts a new chain"
    with pytest.raises(ChainGap) as refused:
        restore_at_repo(repo, str(missed[1]))
    assert f"{first_end + 1}..{fulls[1].last - 1}" in refused.value.message
    old = restore_at_repo(repo, str(first_end))  # the old chain still restores up to its end
    assert old.verified
    assert restore_at_repo(repo, "latest").verified


def test_leases_are_granted_again_with_their_ids_and_ttls(
    etcd_scratch: EtcdServer, follower: Any, restore_at: Any
) -> None:
    src = settings_of(etcd_scratch)
    f = follower()
    f.wait_for(lambda link: link.kind == "full")
    lease = int(gateway(src, "/v3/lease/grant", {"TTL": 600})["ID"])
    short = int(gateway(src, "/v3/lease/grant", {"TTL": 60})["ID"])  # revoked below, never left to expire
    put(src, "/leased/a", b"a", lease)
    put(src, "/leased/b", b"b", lease)
    with_short = put(src, "/leased/short", b"s", short)
    gateway(src, "/v3/lease/revoke", {"ID": short})  # deletes /leased/short at one revision
    end = put(src, "/after", b"x")
    f.wait_for(lambda link: link.last >= end)
    f.stop()
    before_revoke = restore_at(str(with_short), etcd_scratch)
    assert before_revoke.verified, [c for c in before_revoke.checks if not c.ok]
    restored = settings_of(EtcdServer.from_state(dict(before_revoke.result.details["server"])))
    assert int(gateway(restored, "/v3/lease/timetolive", {"ID": lease})["grantedTTL"]) == 600
    latest = restore_at("latest", etcd_scratch)
    assert latest.verified
    restored = settings_of(EtcdServer.from_state(dict(latest.result.details["server"])))
    assert b"/leased/short" not in etcdctl_dump(restored, end)


# --- folding, listing, retention, the CLI --------------------------------------------------------


def test_fold_makes_a_full_that_later_restores_start_from(
    repo: Repository,
    etcd_scratch: EtcdServer,
    follower: Any,
    restore_at: Any,
    tmp_path: Path,
    stop_restored: list[Any],
) -> None:
    src = settings_of(etcd_scratch)
    f = follower(period=0.5)
    f.wait_for(lambda link: link.kind == "full")
    lease = int(gateway(src, "/v3/lease/grant", {"TTL": 300})["ID"])
    for i in range(5):
        txn(src, {f"/fold/{i}/{k}": noise(100, 10 * i + k) for k in range(10)})
        written = put(src, f"/fold/leased/{i}", b"l", lease)
        f.wait_for(lambda link, written=written: link.last >= written)  # one delta each, whatever the load
    folded_at = revision(src)
    f.wait_for(lambda link: link.last >= folded_at)
    result = compact(repo, plugin, options={"workdir": str(tmp_path)})
    assert result.manifest is not None and result.deltas >= 3
    assert result.manifest.chain is not None and result.manifest.chain.last == folded_at
    later = put(src, "/after/fold", b"x")
    f.wait_for(lambda link: link.last >= later)
    f.stop()
    outcome = restore_at("latest", etcd_scratch)
    assert outcome.verified, [c for c in outcome.checks if not c.ok]
    point = outcome.result.details["point_in_time"]
    assert point["base_backup"] == result.manifest.id and point["revisions"] == 1
    assert restore_at(str(folded_at - 3), etcd_scratch).verified  # before the fold: from the first full
    target = {"data_dir": str(tmp_path / "folded" / "data"), "start": True, "lab_dir": str(tmp_path / "folded-lab")}
    target["compare_with"] = src
    plain = run_restore(repo, result.manifest, plugin, target)  # the folded full on its own
    stop_restored.append(plain.result.details)
    assert plain.verified, [c for c in plain.checks if not c.ok]
    assert compact(repo, plugin).manifest is not None  # the delta after the fold
    assert compact(repo, plugin).manifest is None  # nothing left to fold


def test_list_shows_a_chain_on_one_line_and_bad_points_are_one_line_errors(
    cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer
) -> None:
    src = settings_of(etcd_scratch)
    repo = configure(cli, tmp_path, src)
    proc = follow_cli(cli, "--period", "0.3")
    wait_tip(repo, lambda link: link.kind == "full")
    for i in range(4):
        written = put(src, f"/l/{i}", b"v")
        wait_tip(repo, lambda link, written=written: link.last >= written)  # one delta each, whatever the load
    end = put(src, "/l/end", b"v")
    wait_tip(repo, lambda link: link.last >= end)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert len(listed) == 1 and listed[0]["kind"] == "full"
    assert listed[0]["chain"]["deltas"]["count"] >= 2 and listed[0]["chain"]["deltas"]["last"] == end
    everything = json.loads(cli("list", "--json", "--deltas", check=True).stdout)
    assert len(everything) == 1 + listed[0]["chain"]["deltas"]["count"]
    assert "deltas to rev" in cli("list", check=True).stdout
    data_dir = tmp_path / "bad" / "data"
    args = ["restore", "latest", "-p", "etcd", "-t", f"data_dir={data_dir}"]
    assert_clean_error(cli(*args, "--at", "yesterday-ish"), 2, "neither a revision")
    assert_clean_error(cli(*args, "--at", str(end + 1000)), 6, f"ends at {end}")
    assert not data_dir.exists()


def test_retention_keeps_the_pitr_window_and_what_it_replays() -> None:
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)

    def link(i: int, kind: str, seq: int, minutes: float) -> BackupRef:
        at = t0 + dt.timedelta(minutes=minutes)
        return BackupRef(f"b{i:04d}", at, link=ChainPosition(kind, "b0000", seq, at))

    refs = [link(0, "full", 0, 0)]
    refs += [link(i, "delta", i, i / 3) for i in range(1, 361)]  # a delta every 20 s for 2 h
    refs.append(link(999, "full", 180, 60.5))  # folded at the 1 h delta
    now = t0 + dt.timedelta(hours=2)
    policy = RetentionPolicy(pitr_window=dt.timedelta(minutes=30), keep_daily=1)
    kept = {d.backup.id for d in decide(refs, policy, now) if d.keep}
    assert "b0999" in kept and "b0000" not in kept  # the fold replaces the first full for the window
    assert {f"b{i:04d}" for i in range(181, 361)} <= kept
    assert not {f"b{i:04d}" for i in range(1, 181)} & kept
    no_window = {d.backup.id for d in decide(refs, RetentionPolicy(keep_last=1), now) if d.keep}
    assert no_window == kept, "the newest recovery point alone needs the same links here"


def test_rehearsal_rpo_uses_the_recovery_point_a_restore_reports() -> None:
    manifest = Manifest(
        id="20261201T000000Z-abcdef",
        store_id="s",
        started="2026-12-01T00:00:00Z",
        finished="2026-12-01T00:00:10Z",
        status="complete",
        hostname="h",
        drtool_version="0",
        plugins={"etcd": PluginOutcome(status="ok", started="x", finished="2026-12-01T00:00:10Z")},
    )
    failure = dt.datetime(2026, 12, 1, 1, 0, 0, tzinfo=dt.UTC)
    assert rpo(manifest, ["etcd"], failure) == {"etcd": 3590.0}
    assert rpo(manifest, ["etcd"], failure, {"etcd": "2026-12-01T00:59:45.5Z"}) == {"etcd": 14.5}


def test_a_follow_set_has_one_plugin_and_no_schedule() -> None:
    sets = parse_backup_sets({"etcd-prod": {"plugins": ["etcd"], "follow": {"period": 5}}}, "config")
    assert sets["etcd-prod"].schedule_text() == "continuous (drtool follow)"
    with pytest.raises(UsageError, match="follow"):
        parse_backup_sets({"bad": {"plugins": ["etcd"], "follow": {}, "cron": "* * * * *"}}, "config")


def test_a_delta_that_does_not_fit_its_full_is_refused(
    repo: Repository, etcd_scratch: EtcdServer, follower: Any, restore_at: Any
) -> None:
    """A delta claiming a history the full does not have (here: a key's 5th version where the full has
    none) fails its guarded transaction, and nothing is restored."""
    src = settings_of(etcd_scratch)
    f = follower()
    f.wait_for(lambda link: link.kind == "full")
    end = put(src, "/real", b"1")
    f.wait_for(lambda link: link.last >= end)
    f.stop()
    tip = f.session.tip()
    forged = Revision(
        end + 1,
        tip.link.last_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        (Op(True, b64(b"/forged"), b64(b"x"), 3, 5, 0, 7),),
    )

    def write(ctx: Any) -> tuple[dict[str, Any], Span]:
        with ctx.artifact(ARTIFACT, sensitive=True) as sink:
            sink.write(header(tip.meta["cluster_id"], end + 1, end + 1, 1, {}))
            sink.write(forged.line())
        return {"cluster_id": tip.meta["cluster_id"]}, Span(end + 1, end + 1, forged.time, forged.time)

    f.session.write_delta(tip, write)
    with pytest.raises(IntegrityError, match=f"revision {end + 1} of the deltas does not apply"):
        restore_at("latest")
    assert restore_at(str(end), etcd_scratch).verified  # the genuine part of the chain still restores
