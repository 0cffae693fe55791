"""etcd continuous backup on a real etcd: the follower's deltas and point-in-time restores from them.

Each test writes to its own scratch etcd (real, single member), follows it into a real local store, and
restores into a NEW etcd member that verify then compares key by key with the source at the restored
revision (the source still has those revisions: nothing here compacts unless the test says so).
Writes and read-backs go through plain requests/etcdctl (tests/fixtures), not the plugin's client.
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from drtool_plugins.etcd import EtcdPlugin

from drtool.errors import DrtoolError, IntegrityError
from drtool.follow import FollowSession, run_follow
from drtool.lab.components.etcd import EtcdServer
from drtool.lab.etcd_seed import gateway, settings_of
from drtool.repo.chains import ChainGap
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.fixtures.etcd import etcdctl_dump

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
    """``drtool follow`` in a thread of the test process (stop = what SIGTERM does)."""

    def __init__(self, repo: Repository, source: Mapping[str, Any], **options: Any) -> None:
        self.session = FollowSession(repo, "etcd", "follow", {"period": 1.0, "idle": 5.0, **options})
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(repo, source), daemon=True)
        self.thread.start()

    def _run(self, repo: Repository, source: Mapping[str, Any]) -> None:
        try:
            run_follow(repo, plugin, source, self.session)
        except BaseException as exc:  # noqa: BLE001 -- surfaced by stop()
            self.error = exc

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> None:
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
def restore_at(repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list[Any]) -> Any:
    counter = iter(range(100))

    def restore(at: Any, source: EtcdServer | None = None, **options: Any) -> Any:
        n = next(counter)
        target: dict[str, Any] = {
            "data_dir": str(tmp_path / f"pitr-{n}" / "data"),
            "name": f"pitr-{n}",
            "start": True,
            "lab_dir": str(lab_root / f"pitr-{tmp_path.name}-{n}"),
        }
        if source is not None:
            target["compare_with"] = settings_of(source)
        outcome = run_restore(repo, "latest", plugin, target, options={"at": at, **options})
        stop_restored.append(outcome.result.details)
        return outcome

    return restore


def test_pitr_to_a_revision_in_the_middle_of_a_transaction_burst(
    etcd_scratch: EtcdServer, follower: Any, restore_at: Any
) -> None:
    src = settings_of(etcd_scratch)
    for i in range(50):
        put(src, f"/registry/pods/ns/p{i}", os.urandom(64))
    f = follower()
    f.wait_for(lambda link: link.kind == "full")
    revs = [txn(src, {f"/burst/{r}/{k}": f"{r}-{k}".encode() * 10 for k in range(20)}) for r in range(30)]
    delete(src, "/registry/pods/ns/p1", prefix=True)  # p1, p10..p19: one revision, many deletes
    put(src, "/big", os.urandom(1024 * 1024))
    end = revision(src)
    f.wait_for(lambda link: link.kind == "delta" and link.last >= end)
    f.stop()

    middle = revs[14]
    outcome = restore_at(str(middle), etcd_scratch)
    assert outcome.verified, [c for c in outcome.checks if not c.ok]
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
        put(src, f"/k{i}", b"v")
        time.sleep(0.8)  # one delta each, about
    end = revision(src)
    f.wait_for(lambda link: link.last >= end)
    f.stop()
    deltas = [m for m in (repo.get_manifest(i) for i in repo.backup_ids()) if m.is_delta]
    assert len(deltas) >= 3
    victim = deltas[1]
    assert victim.chain is not None
    repo.delete_manifest(victim.id)
    with pytest.raises(ChainGap) as refused:
        restore_at(str(end))
    assert f"{victim.chain.first}..{victim.chain.last}" in refused.value.message
    before = restore_at(str(victim.chain.first - 1), etcd_scratch)  # a point before the gap still restores
    assert before.verified


def test_errors_are_typed(restore_at: Any) -> None:
    with pytest.raises(DrtoolError):
        restore_at("not a time")
    assert issubclass(ChainGap, IntegrityError)
