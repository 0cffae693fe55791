"""Store locks on the local backend and on a real MinIO: conflicts, refresh, stale recovery, lost locks."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import time

import pytest

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import LOCK
from drtool.errors import DrtoolError
from drtool.repo import layout
from drtool.repo.lock import LockInfo, LockLost, StoreLocked, acquire, list_locks, read_lock, remove_stale_locks
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from tests.fixtures.core import PASSPHRASE


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def store(request: pytest.FixtureRequest, tmp_path) -> Repository:
    url = str(tmp_path / "store") if request.param == "local" else request.getfixturevalue("s3_store_url")
    return Repository.init(open_backend(url), passphrase=PASSPHRASE)


def test_shared_locks_coexist_exclusive_excludes(store: Repository) -> None:
    with acquire(store, "shared", "backup a"), acquire(store, "shared", "backup b"):
        assert [lock.kind for lock in list_locks(store)] == ["shared", "shared"]
        with pytest.raises(StoreLocked, match=r"shared lock .* held by 'backup [ab]'"):
            acquire(store, "exclusive", "prune")
    with acquire(store, "exclusive", "prune") as held:
        info = read_lock(store, held.id)
        assert (info.kind, info.owner, info.error) == ("exclusive", "prune", None)
        with pytest.raises(StoreLocked, match="exclusive lock"):
            acquire(store, "shared", "backup c")
        with pytest.raises(StoreLocked):
            acquire(store, "exclusive", "another prune")
    assert list_locks(store) == []  # released locks leave nothing behind


def test_waiting_for_a_lock(store: Repository) -> None:
    held = acquire(store, "exclusive", "prune")
    threading.Timer(1.0, held.release).start()
    started = time.monotonic()
    with acquire(store, "shared", "backup", wait=20, retry_interval=0.2):
        assert 0.8 < time.monotonic() - started < 10


def test_refresh_moves_expiry_forward_and_stale_locks_do_not_block(store: Repository) -> None:
    with acquire(store, "shared", "backup", ttl=1.2) as held:
        first = read_lock(store, held.id).expires
        deadline = time.monotonic() + 60  # a refresh every ttl/6, however late its thread runs
        while read_lock(store, held.id).expires <= first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert read_lock(store, held.id).expires > first
        held.check()
    stale = acquire(store, "shared", "crashed backup", ttl=0.3)
    stale._stop.set()  # the holder stops refreshing, as a frozen or partitioned process would
    stale._thread.join()
    time.sleep(0.5)
    assert read_lock(store, stale.id).stale()
    with acquire(store, "exclusive", "prune"):  # an expired lock does not block
        pass
    assert [lock.id for lock in remove_stale_locks(store)] == [stale.id]
    with pytest.raises(LockLost, match="was lost: it expired"):
        stale.check()  # the old holder comes back: it must not publish anything


def test_lock_of_a_dead_process_on_this_host_is_stale(store: Repository, tmp_path) -> None:
    """A holder killed with SIGKILL never releases; its pid is gone, so the lock is stale at once."""
    script = (
        "import os, sys\n"
        "from drtool.crypto.credentials import Credentials\n"
        "from drtool.repo.repository import Repository\n"
        "from drtool.repo.lock import acquire\n"
        "from drtool.backends import open_backend\n"
        f"repo = Repository.open(open_backend({store.backend.url!r}), Credentials(passphrase={PASSPHRASE!r}))\n"
        "acquire(repo, 'exclusive', 'killed prune')\n"
        "os._exit(0)\n"  # no release, no atexit: as if killed
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    [dead] = list_locks(store)
    assert dead.owner == "killed prune" and dead.stale()
    with acquire(store, "shared", "backup"):
        pass


def test_unreadable_lock_blocks_prune_not_backups(store: Repository) -> None:
    """A lock sealed with the store's key that this drtool cannot read (a newer version's) may be a prune's."""
    now = dt.datetime.now(dt.UTC)
    lock_id = layout.new_lock_id(now)
    store.backend.put(layout.lock(lock_id), store.key.seal(LOCK, lock_id, b'{"version": 99}'), exclusive=True)
    [bad] = list_locks(store)
    assert bad.error and bad.authentic and not bad.stale()
    with acquire(store, "shared", "backup"):
        pass
    with pytest.raises(StoreLocked, match="unreadable"):
        acquire(store, "exclusive", "prune")
    remove_stale_locks(store, everything=True)
    with acquire(store, "exclusive", "prune"):
        pass


def test_lock_from_another_store_does_not_authenticate(store: Repository, tmp_path) -> None:
    """Garbage, or a lock replayed from another store: no drtool of this store holds it, so it blocks nothing
    (before: it blocked every prune until `drtool unlock --remove-all`, which Object Lock may forbid)."""
    other = Repository.init(open_backend(str(tmp_path / "other")), passphrase=PASSPHRASE)
    with acquire(other, "exclusive", "prune") as held:
        store.backend.put(layout.lock(held.id), other.backend.get(layout.lock(held.id)))
    garbage = layout.new_lock_id(dt.datetime.now(dt.UTC))
    store.backend.put(layout.lock(garbage), b"garbage that does not decrypt", exclusive=True)
    for lock_id in (held.id, garbage):
        assert read_lock(store, lock_id).error is not None and not read_lock(store, lock_id).authentic
    with acquire(store, "exclusive", "prune"):
        pass
    assert set(store.skipped) == {layout.lock(held.id), layout.lock(garbage)}


def test_backup_takes_a_shared_lock_and_a_lost_lock_publishes_nothing(store: Repository) -> None:
    session = BackupSession(store, backup_set="s")
    with session:
        [lock] = list_locks(store)
        assert lock.kind == "shared" and lock.owner == f"backup s {session.backup_id}"
        with session.context_for("test").artifact("a") as sink:
            sink.write(b"x" * 1000)
        store.backend.delete(layout.lock(lock.id))  # a prune took it for stale
        with pytest.raises(LockLost):
            session.commit()
    assert store.backup_ids() == []
    assert list_locks(store) == []
    # and while a prune holds the store, a backup waits, then gives up with a clear error
    with acquire(store, "exclusive", "prune"), pytest.raises(StoreLocked):
        BackupSession(store, lock_wait=0.5)


def test_store_locked_is_a_clean_drtool_error(store: Repository) -> None:
    with acquire(store, "exclusive", "prune"), pytest.raises(DrtoolError) as err:
        acquire(store, "shared", "backup")
    assert err.value.exit_code == 3 and "drtool unlock" in err.value.one_line()


def test_lock_info_round_trip_fields() -> None:
    info = LockInfo(id="x", kind="shared", owner="o", host="h", pid=1, created="c", expires="e")
    assert info.to_json() == {
        "version": 1,
        "id": "x",
        "kind": "shared",
        "owner": "o",
        "host": "h",
        "pid": 1,
        "created": "c",
        "expires": "e",
    }


def test_reopened_store_sees_locks(store: Repository) -> None:
    again = Repository.open(open_backend(store.backend.url), Credentials(passphrase=PASSPHRASE))
    with acquire(store, "shared", "backup"):
        assert len(list_locks(again)) == 1


@pytest.mark.e2e  # the drtool CLI in a child process
def test_cli_backup_waits_lock_wait_seconds_for_a_prune_then_fails_cleanly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.fixtures.core import Cli, assert_clean_error

    cli = Cli(tmp_path / "home")
    cli.home.mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x" * 1000)
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"sources: {{files: {{paths: [{tmp_path / 'src'}]}}}}\n")
    cli("init", "--store", str(tmp_path / "store"), check=True)
    repo = Repository.open(open_backend(str(tmp_path / "store")), Credentials(passphrase=PASSPHRASE))
    prune_lock = acquire(repo, "exclusive", "a prune")
    try:
        started = time.monotonic()
        assert_clean_error(cli("backup", "-p", "files", "--lock-wait", "2"), 3, "a prune")
        assert 2 <= time.monotonic() - started < 60
    finally:
        prune_lock.release()
    cli("backup", "-p", "files", "--lock-wait", "2", check=True)
