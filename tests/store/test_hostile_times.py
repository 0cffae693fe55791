"""Issue 25, attacks 3 and 4: steering a point-in-time restore, and emptying `latest`, through store times.

3. A key holder (the CronJob's key file and write-only credentials) writes, now, a folded full of a real
   etcd chain with an old ``chain.last_time`` and a reused seq: `restore --at T` must still restore the
   genuine state at T, use the fold only with `--trust-compacted`, and `check` must name it.
4. A writer without any key moves the store's own time of every manifest (locally ``chmod``, ``chown``,
   ``touch``/``utime`` and a rename there and back; on MinIO a re-PUT of each manifest's own bytes, a new
   version): `latest` must stay on the genuine newest backup.

Each attack runs against a local store and the real MinIO (Object Lock, the write-only backup user), with
``max_clock_skew`` at a few seconds so that a few seconds of waiting stand for hours.
docs/threat-model.md names these tests.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.etcd_seed import settings_of
from drtool_plugins.etcd import EtcdPlugin

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.errors import NotFound
from drtool.follow import commit_link
from drtool.plans.schema import Source
from drtool.plans.source import resolve_backup
from drtool.repo import layout
from drtool.repo.chains import Link, find_point, read_links
from drtool.repo.manifest import ChainLink, Manifest, utc_now
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.etcd import etcdctl_dump
from tests.plugins.test_etcd_follow import InProcessFollower, put
from tests.store import test_hostile_store, test_immutability
from tests.store.test_hostile_store import Actors, Site, _keyfile_secret, environ, forge

# the two sites (a local store; MinIO with Object Lock and the write-only backup user) and their actors
locked_bucket = test_immutability.locked_bucket
restricted_users = test_immutability.restricted_users
site = test_hostile_store.site
source = test_hostile_store.source
actors = test_hostile_store.actors

SKEW = dt.timedelta(seconds=3)


def short_skew(actors: Actors) -> None:
    """``max_clock_skew`` of a few seconds in the drtool config the CLI reads."""
    config = actors.cli.home / ".config/drtool/config.yaml"
    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, "max_clock_skew": f"{int(SKEW.total_seconds())}s"}))


def opened(site: Site, who: str, credentials: Credentials) -> Repository:
    with environ(getattr(site, who)):
        return Repository.open(site.backend(who), credentials, max_skew=SKEW)


# --- 3. a fold written now, with an old position and a reused seq -----------------------------------------


def genuine_chain(repo: Repository, src: dict[str, str]) -> tuple[list[Link], list[int]]:
    """A real follower's chain: a full, then one delta per write of /app/config (v1..v4)."""
    put(src, "/app/config", b"v0")
    follower = InProcessFollower(repo, src, period=0.3)
    follower.wait_for(lambda link: link.kind == "full")
    revisions = []
    for i in range(1, 5):
        revisions.append(put(src, "/app/config", f"v{i}".encode()))
        follower.wait_for(lambda link, rev=revisions[-1]: link.last >= rev)
    follower.stop()
    return sorted(read_links(repo, "etcd"), key=lambda link: link.seq), revisions


def forge_fold(cron: Repository, src: dict[str, str], folded: Link) -> Manifest:
    """What `drtool compact` writes for ``folded`` (its seq, revision and time), holding the attacker's etcd."""
    with BackupSession(cron, backup_set="follow") as session:
        started = utc_now()
        meta = dict(EtcdPlugin().backup(src, session.context_for("etcd")))
        at = f"{folded.last_time:%Y-%m-%dT%H:%M:%S.%fZ}"
        link = ChainLink(plugin="etcd", base=folded.base, seq=folded.seq, last=folded.last, last_time=at)
        return commit_link(session, "etcd", started, meta, "full", link)


def restore_at(actors: Actors, tmp_path: Path, lab_root: Path, at: str, *extra: str) -> Any:
    name = f"pitr-{len(list(tmp_path.glob('pitr-*')))}"
    target = [f"data_dir={tmp_path / name / 'data'}", f"name={name}", "start=true", f"lab_dir={lab_root / name}"]
    args = ["restore", "latest", "-p", "etcd", "--at", at, *(a for t in target for a in ("-t", t)), "--json"]
    return actors.operator(*args, *extra)


def test_a_fold_forged_now_does_not_steer_a_point_in_time_restore(
    actors: Actors,
    site: Site,
    etcd_scratch: EtcdServer,
    tmp_path: Path,
    lab_root: Path,
    stop_restored: list[Any],
) -> None:
    """Before: `restore --at T` started from the forged fold and restored the attacker's keyspace (verified
    and all). After: it replays the genuine chain to T and says which folds it passed over; the fold is
    used only with --trust-compacted; `check` names the fold and fails on the reused seq."""
    actors.init()
    short_skew(actors)
    src = settings_of(etcd_scratch)
    operator = opened(site, "admin", Credentials(passphrase=PASSPHRASE))
    links, revisions = genuine_chain(operator, src)
    base = links[0]
    folded = next(link for link in links if link.is_delta and link.last >= revisions[1])  # holds v2
    point = folded.last_time.isoformat()
    genuine_state = etcdctl_dump(src, folded.last)
    time.sleep(SKEW.total_seconds() + 1)  # what follows happens later than T, as the store's clock sees it

    put(src, "/app/config", b"forged")  # the attacker owns the cluster, and the CronJob's key file
    put(src, "/attacker", b"was here")
    cron = opened(site, "writer", Credentials(keyfile_secret=_keyfile_secret(actors.keyfile)))
    forged = [forge_fold(cron, src, folded).id for _ in range(2)]  # a fold, and one more at the same seq

    proc = restore_at(actors, tmp_path, lab_root, point)
    assert proc.returncode == 0, proc.stderr
    details = json.loads(proc.stdout)["details"]
    stop_restored.append(details)
    restored = etcdctl_dump(settings_of(EtcdServer.from_state(dict(details["server"]))), 0)  # as it is now
    used = details["point_in_time"]["base_backup"]
    value = restored.get(b"/app/config", (b"",))[0].decode()
    print(
        f"\nrestore --at {point}: from {used} (genuine full {base.backup_id}, forged {forged}): "
        f"/app/config={value}, /attacker {'present' if b'/attacker' in restored else 'absent'}"
    )
    print(proc.stderr)
    assert used == base.backup_id
    assert restored == genuine_state and restored[b"/app/config"][0] == b"v2"
    assert all(f in proc.stderr for f in forged) and "--trust-compacted" in proc.stderr

    revision = find_point(operator, "etcd", "latest", str(folded.last))  # the store received it before the forgery
    assert revision.base.backup_id == base.backup_id

    trusting = restore_at(actors, tmp_path, lab_root, point, "--trust-compacted")
    assert trusting.returncode == 0, trusting.stderr
    trusted = json.loads(trusting.stdout)["details"]
    stop_restored.append(trusted)
    assert trusted["point_in_time"]["base_backup"] in forged  # the opt-in: folds count by what they state
    assert b"/attacker" in etcdctl_dump(settings_of(EtcdServer.from_state(dict(trusted["server"]))), 0)

    checked = actors.operator("check", "--json")
    report = json.loads(checked.stdout)
    print(actors.operator("check").stdout)
    assert checked.returncode == 4
    assert len(set(report["flagged"]) & set(forged)) == 1 and "reuses seq" in str(report["flagged"])
    assert set(report["compacted"]) | set(report["flagged"]) >= set(forged)


# --- 4. keyless metadata changes must not empty `latest` ----------------------------------------------------


def move_store_times(site: Site) -> int:
    """What a writer without the key can do to every manifest's store time; returns how many it moved."""
    if site.kind == "local":
        files = [p for p in (Path(site.url) / layout.MANIFESTS).iterdir() if p.is_file()]
        long_ago = time.time() - 3 * 86400
        for path in files:
            os.chmod(path, 0o644)
            os.chmod(path, 0o600)
            os.chown(path, os.getuid(), os.getgid())
            os.utime(path, (long_ago, long_ago))
            aside = path.with_name(path.name + ".aside")
            os.rename(path, aside)
            os.rename(aside, path)
        return len(files)
    writer = site.backend()  # the CronJob's write-only user: it may read and PUT, not delete
    names = list(writer.list(layout.MANIFESTS))
    for name in names:
        writer.put(name, writer.get(name))  # the same bytes again: a new version, LastModified now
    return len(names)


def test_moving_every_manifests_store_time_keeps_latest_on_the_genuine_newest(actors: Actors, site: Site) -> None:
    """Before: every genuine backup became "back-dated" and `latest` found nothing. After: chmod, chown,
    touch, utime and renames move no birth time, and a re-PUT of the same bytes keeps its first version's
    time, so nothing is flagged and `latest` is the genuine newest."""
    actors.init()
    short_skew(actors)
    genuine = [actors.backup() for _ in range(3)]
    time.sleep(SKEW.total_seconds() + 1)
    assert move_store_times(site) == 3
    shown = actors.operator("show", "latest", "--json")
    print(f"\nshow latest after moving {site.kind} store times: rc {shown.returncode} {shown.stderr.strip()}")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == genuine[-1] and json.loads(shown.stdout)["flag"] is None
    listed = json.loads(actors.operator("list", "--json", check=True).stdout)
    assert [e["flag"] for e in listed] == [None, None, None]


def test_where_no_birth_time_is_kept_latest_falls_back_to_the_newest_back_dated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A filesystem without birth times (the store time is then the change time, which chmod moves): when
    every candidate looks back-dated, `latest` is the newest of them, said aloud; a manifest dated into the
    future is never chosen, and `latest-before` (which a back-dated forgery would steer) has no fallback."""
    import drtool.backends.local as local

    monkeypatch.setattr(local, "birth_time", lambda *args, **kwargs: None, raising=False)
    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    repo.max_skew = SKEW
    genuine = []
    for _ in range(3):
        with BackupSession(repo) as session:
            genuine.append(session.commit().id)
        time.sleep(1.1)  # ids order by the second
    future = forge(repo, repo.get_manifest(genuine[-1]), dt.datetime.now(dt.UTC) + dt.timedelta(days=1), repo.backend)
    time.sleep(SKEW.total_seconds() + 1)
    for path in (tmp_path / "store" / layout.MANIFESTS).iterdir():
        os.chmod(path, 0o600)
    with caplog.at_level(logging.WARNING):
        latest = repo.find_backup("latest")
    assert latest.id == genuine[-1] and latest.id != future
    assert "look back-dated" in caplog.text
    assert resolve_backup(repo, Source.model_validate({"backup": "latest"})) == genuine[-1]
    before = Source.model_validate({"backup": {"latest-before": dt.datetime.now(dt.UTC).isoformat()}})
    with pytest.raises(NotFound, match="flagged"):
        resolve_backup(repo, before)


def test_a_files_birth_time_survives_metadata_changes_and_a_copy_gets_a_new_one(tmp_path: Path) -> None:
    from drtool.backends.birth import birth_time  # here: the module is new, and the attacks above run without it

    path = tmp_path / "object"
    path.write_bytes(b"x")
    born = birth_time(path)
    if born is None:
        pytest.skip("this filesystem keeps no birth time")
    time.sleep(0.05)
    os.chmod(path, 0o644)
    os.utime(path, (0, 0))
    os.rename(path, tmp_path / "moved")
    os.rename(tmp_path / "moved", path)
    assert birth_time(path) == born
    with open(path, "rb") as f:
        assert birth_time(fd=f.fileno()) == born
    shutil.copy2(path, tmp_path / "copy")
    os.replace(tmp_path / "copy", path)
    assert birth_time(path) != born  # a new file: a copy of the store is judged as received when copied
