"""Hostile store writers (issue 15): attacks on a store's keys, manifests and config by someone who holds
no key, or only what the in-cluster CronJob holds (its key file and write-only store credentials).

Each attack runs against a local store and the real MinIO (a bucket with Object Lock and the recommended
write-only backup user of docs/reliability.md), through the `drtool` command a user runs. Each is refused
with the line the user sees, and nothing is lost. docs/threat-model.md names these tests.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from drtool_lab.components.minio import MinioServer

from drtool.backends import open_backend
from drtool.backends.backend import Backend
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import MANIFEST, MasterKey
from drtool.errors import IntegrityError
from drtool.repo import layout
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.faults import FaultProxy
from tests.fixtures.noise import noise
from tests.store import test_immutability

# a bucket with Object Lock and real MinIO users: `backup` (write-only) and `prune` (test_immutability.py)
locked_bucket = test_immutability.locked_bucket
restricted_users = test_immutability.restricted_users

MIB = 1024 * 1024
SETS = {"nightly": {"plugins": ["files"], "cron": "0 2 * * *", "retention": {"keep_last": 5, "keep_daily": 7}}}


@contextlib.contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """``env`` in this process's environment for the block (boto3 reads credentials when a client is made)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield


@dataclasses.dataclass
class Site:
    """Where the store lives and who can write it: the operator, and the CronJob's write-only identity."""

    kind: str
    url: str
    admin: dict[str, str]  # the operator's store credentials (MinIO root; nothing locally)
    writer: dict[str, str]  # the CronJob's: write-only on MinIO, the same filesystem locally

    def backend(self, who: str = "writer") -> Backend:
        with environ(getattr(self, who)):
            return open_backend(self.url)


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    if request.param == "local":
        return Site("local", str(tmp_path / "store"), {}, {})
    minio: MinioServer = request.getfixturevalue("minio")
    bucket = request.getfixturevalue("locked_bucket")
    users = request.getfixturevalue("restricted_users")
    return Site("minio", f"s3://{bucket}/{test_immutability.PREFIX}", minio.env(), users["backup"])


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "model.bin").write_bytes(random.Random(15).randbytes(2 * MIB))
    return folder


class Actors:
    """The operator (passphrase, full store credentials) and the CronJob (key file, write-only credentials)."""

    def __init__(self, cli: Cli, site: Site, source: Path) -> None:
        self.cli, self.site = cli, site
        self.keyfile = cli.home / "cronjob.key"
        config = cli.home / ".config/drtool/config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            yaml.safe_dump({"store": site.url, "sources": {"files": {"paths": [str(source)]}}, "backup_sets": SETS})
        )

    def operator(self, *args: str, env: dict[str, str | None] | None = None, **kwargs: Any) -> Any:
        return self.cli(*args, env={**self.site.admin, **(env or {})}, **kwargs)

    def cronjob(self, *args: str, env: dict[str, str | None] | None = None, **kwargs: Any) -> Any:
        return self.cli(*args, env={**self.site.writer, "DRTOOL_KEYFILE": str(self.keyfile), **(env or {})}, **kwargs)

    def fresh_machine(self) -> dict[str, str | None]:
        """The environment of a machine that has never seen the store: no pins (drtool/repo/pins.py)."""
        folder = self.cli.home / f"fresh-{secrets.token_hex(4)}"
        return {"DRTOOL_STATE_DIR": str(folder)}

    def init(self) -> str:
        self.operator("init", "--store", self.site.url, "--keyfile", str(self.keyfile), check=True)
        return json.loads(self.site.backend().get(layout.CONFIG))["store_id"]

    def backup(self, *args: str) -> str:
        proc = self.cronjob("backup", "--set", "nightly", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["id"]


@pytest.fixture
def actors(cli: Cli, site: Site, source: Path) -> Actors:
    return Actors(cli, site, source)


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("drtool: warning: ")]


# --- 1. key-slot injection: no key needed -------------------------------------------------------------


def plant_passphrase_slot(
    backend: Backend, store_id: str, slot_id: str, passphrase: str, secret: bytes, kdf: dict[str, int]
) -> None:
    """What an attacker with write access to ``keys/`` writes, from docs/store-format.md alone: a slot that
    wraps the attacker's own master key under a guessed passphrase."""
    salt = os.urandom(16)
    wrap = Argon2id(
        salt=salt, length=32, iterations=kdf["iterations"], lanes=kdf["lanes"], memory_cost=kdf["memory_kib"]
    ).derive(passphrase.encode())
    nonce = os.urandom(12)
    sealed = nonce + AESGCM(wrap).encrypt(nonce, secret, f"drtool-keyslot-v1:{store_id}:{slot_id}".encode())
    slot = {
        "version": 1,
        "id": slot_id,
        "kind": "passphrase",
        "label": "passphrase",
        "created": "2026-01-01T00:00:00Z",
        "kdf": {"name": "argon2id", "salt": base64.b64encode(salt).decode(), **kdf},
        "wrapped": base64.b64encode(sealed).decode(),
    }
    backend.put(layout.key_slot(slot_id), json.dumps(slot).encode())


TINY_KDF = {"memory_kib": 8, "iterations": 1, "lanes": 1}
DEFAULT_KDF = {"memory_kib": 65536, "iterations": 3, "lanes": 4}


@pytest.mark.parametrize("kdf", [TINY_KDF, DEFAULT_KDF], ids=["tiny-kdf", "default-kdf"])
def test_a_planted_slot_never_hands_drtool_another_key(actors: Actors, site: Site, kdf: dict[str, int]) -> None:
    """Before: the planted slot (named to be tried first) opened the store with the attacker's key, silently,
    and the next backup was readable by the attacker. After: it is named in one warning and ignored, also on
    a machine that has never seen the store (a machine that has tries its pinned slot first)."""
    store_id = actors.init()
    actors.backup()
    attacker = secrets.token_bytes(32)
    plant_passphrase_slot(site.backend(), store_id, "00000000", PASSPHRASE, attacker, kdf)
    proc = actors.operator("backup", "--set", "nightly", "--json", env=actors.fresh_machine())
    assert proc.returncode == 0, proc.stderr
    backup_id = json.loads(proc.stdout)["id"]
    sealed = site.backend().get(layout.manifest(backup_id))
    with pytest.raises(IntegrityError):
        MasterKey(attacker, store_id).unseal(MANIFEST, backup_id, sealed)  # the attacker reads nothing
    [warning] = warnings(proc.stderr)
    assert "key slot 00000000" in warning and "ignored" in warning, warning
    shown = json.loads(actors.operator("show", backup_id, "--json", check=True).stdout)
    assert shown["id"] == backup_id


def test_a_slot_planted_for_the_cronjobs_key_file_is_ignored(actors: Actors, site: Site) -> None:
    """With the CronJob's key file (not its key: a holder of both needs no slot), an attacker plants a key-file
    slot, named to be tried first, that the same file opens to the attacker's key. The CronJob, on a machine
    without a pin, ignores it: neither the key file's key check nor the store's key records name that key."""
    from drtool.crypto import slots
    from drtool.crypto.master import hkdf

    store_id = actors.init()
    actors.backup()
    attacker = MasterKey(secrets.token_bytes(32), store_id)
    salt = os.urandom(16)
    wrap = hkdf(_keyfile_secret(actors.keyfile), b"drtool v1 keyfile slot", salt=salt)
    kdf = {"name": "hkdf-sha256", "salt": base64.b64encode(salt).decode()}
    wrapped = base64.b64encode(attacker.wrap(wrap, "00000000")).decode()
    planted = slots.KeySlot("00000000", "keyfile", "key file", "2026-01-01T00:00:00Z", kdf, wrapped, version=1)
    site.backend().put(layout.key_slot("00000000"), planted.to_bytes())
    proc = actors.cronjob("backup", "--set", "nightly", "--json", env=actors.fresh_machine())
    assert proc.returncode == 0, proc.stderr
    backup_id = json.loads(proc.stdout)["id"]
    with pytest.raises(IntegrityError):
        attacker.unseal(MANIFEST, backup_id, site.backend().get(layout.manifest(backup_id)))
    [warning] = warnings(proc.stderr)
    assert "key slot 00000000 ignored" in warning, warning


def test_malformed_and_absurd_slots_are_named_and_ignored(actors: Actors, site: Site) -> None:
    """Before: one garbage object in keys/ made every open fail (exit 4), and KDF settings were taken from the
    slot unchecked. After: each bad slot is named in a warning line and skipped; the store opens."""
    store_id = actors.init()
    backend = site.backend()
    backend.put(layout.key_slot("0000000a"), b"\x00not json")
    backend.put(layout.key_slot("0000000b"), json.dumps({"version": 99, "id": "0000000b"}).encode())
    absurd = [("0000000c", {"memory_kib": 2**32 - 1, "iterations": 3, "lanes": 4})]
    absurd.append(("0000000d", {"memory_kib": 65536, "iterations": 10**7, "lanes": 4}))
    absurd.append(("0000000e", {"memory_kib": 65536, "iterations": 3, "lanes": 0}))
    for slot_id, kdf in absurd:  # the wrapped key is never reached: the settings are refused first
        slot = {
            "version": 1,
            "id": slot_id,
            "kind": "passphrase",
            "label": "x",
            "created": "2026-01-01T00:00:00Z",
            "kdf": {"name": "argon2id", "salt": base64.b64encode(os.urandom(16)).decode(), **kdf},
            "wrapped": base64.b64encode(os.urandom(60)).decode(),
        }
        backend.put(layout.key_slot(slot_id), json.dumps(slot).encode())
    proc = actors.operator("list", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    named = warnings(proc.stderr)
    assert len(named) == 5, proc.stderr
    for slot_id in ("0000000a", "0000000b", "0000000c", "0000000d", "0000000e"):
        assert any(f"key slot {slot_id}" in line for line in named), (slot_id, named)
    listed = json.loads(actors.operator("key", "list", "--json", check=True).stdout)
    ignored = {s["id"]: s.get("ignored") for s in listed}
    assert all(ignored[s] for s in ("0000000a", "0000000b", "0000000c", "0000000d", "0000000e")), listed
    assert sum(1 for reason in ignored.values() if not reason) == 2  # the passphrase and the key file
    assert store_id


# --- 2. forged manifests steer latest, latest-before and prune --------------------------------------------


def forge(repo: Repository, template: Manifest, when: dt.datetime, writer: Backend) -> str:
    """A manifest sealed with the CronJob's key and written with its credentials, dated ``when``."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    backup_id = f"{when:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    forged = template.model_copy(update={"id": backup_id, "started": stamp, "finished": stamp})
    writer.put(layout.manifest(backup_id), repo.key.seal(MANIFEST, backup_id, forged.encode()), exclusive=True)
    return backup_id


def test_forged_manifests_steer_neither_latest_nor_prune(actors: Actors, site: Site) -> None:
    """The issue's attack: with the CronJob's key file and write credentials, 19 manifests dated into the
    future and the past. Before: a prune dry run forgot 5 of 5 genuine backups and `latest`/`latest-before`
    named forgeries. After: every forgery is flagged, counted by no rule and chosen by nothing."""
    from drtool.plans.schema import Source
    from drtool.plans.source import resolve_backup

    actors.init()
    genuine = [actors.backup() for _ in range(5)]
    with environ(site.writer):
        repo = Repository.open(site.backend(), Credentials(keyfile_secret=_keyfile_secret(actors.keyfile)))
    template = repo.get_manifest(genuine[-1])
    now = dt.datetime.now(dt.UTC)
    future = [now + dt.timedelta(minutes=10)] + [now + dt.timedelta(days=d) for d in range(1, 10)]
    past = [now - dt.timedelta(days=d) for d in range(1, 10)]
    forged = [forge(repo, template, when, site.backend()) for when in future + past]
    assert len(forged) == 19

    proc = actors.operator("prune", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    lost = sorted(set(report["forgotten"]) & set(genuine))
    latest = json.loads(actors.operator("show", "latest", "--json", check=True).stdout)["id"]
    with environ(site.admin):
        operator = Repository.open(site.backend("admin"), Credentials(passphrase=PASSPHRASE))
    before = Source.model_validate({"backup": {"latest-before": (now + dt.timedelta(minutes=30)).isoformat()}})
    chosen = resolve_backup(operator, before)
    print(
        f"\nprune dry run: {len(lost)} of 5 genuine backups forgotten; latest: {latest} (genuine: {latest in genuine});"
        f" latest-before now+30m: {chosen} (genuine: {chosen in genuine})"
    )
    assert lost == []
    assert not set(forged) & set(report["forgotten"])  # flagged, kept for the operator to look at
    assert latest == genuine[-1]
    assert chosen == genuine[-1]

    listed = json.loads(actors.operator("list", "--json", check=True).stdout)
    flags = {e["id"]: e["flag"] for e in listed}
    assert all(flags[i] for i in forged) and not any(flags[i] for i in genuine), flags
    checked = actors.operator("check", "--json")
    assert checked.returncode == 4 and set(json.loads(checked.stdout)["flagged"]) == set(forged)


def _keyfile_secret(path: Path) -> bytes:
    from drtool.crypto.slots import parse_keyfile

    return parse_keyfile(path.read_text(), str(path))


# --- 4. the store config: a writer can shrink chunk bounds ------------------------------------------------


def test_a_shrunk_chunker_config_is_refused(actors: Actors, site: Site) -> None:
    """Before: the CronJob's next backup cut 1 KiB chunks (thousands of objects). After: the changed config
    is refused before anything is written."""
    actors.init()
    backend = site.backend()
    config = json.loads(backend.get(layout.CONFIG))
    config["chunker"] |= {"min_size": 64, "avg_size": 256, "max_size": 1024}
    backend.put(layout.CONFIG, json.dumps(config).encode())
    proc = actors.cronjob("backup", "--set", "nightly", "--json")
    chunks = json.loads(proc.stdout)["stats"]["chunks"] if proc.returncode == 0 else None
    print(f"\nbackup after the config was shrunk: exit {proc.returncode}, {chunks} chunks; {proc.stderr}")
    assert_clean_error(proc, 4, "config of store", "changed since this machine last opened it")
    fresh = actors.cronjob("backup", "--set", "nightly", "--json", env=actors.fresh_machine())
    assert_clean_error(fresh, 4, "drtool-store.json was changed after the store was created")
    assert list(backend.list(layout.MANIFESTS)) == []


def test_a_store_config_changed_through_its_key_record_is_refused_too(actors: Actors, site: Site) -> None:
    """A writer without the key cannot re-sign the record that holds the config's hash."""
    actors.init()
    backend = site.backend()
    root = json.loads(backend.get("keyring/0000"))
    config = json.loads(backend.get(layout.CONFIG))
    config["chunker"] |= {"min_size": 64, "avg_size": 256, "max_size": 1024}
    shrunk = json.dumps(config).encode()
    backend.put(layout.CONFIG, shrunk)
    root["config_sha256"] = hashlib.sha256(shrunk).hexdigest()
    backend.put("keyring/0000", json.dumps(root).encode())
    proc = actors.cronjob("backup", "--set", "nightly", env=actors.fresh_machine())
    assert_clean_error(proc, 5, "not with this store's key")


# --- write-once objects: If-None-Match on every S3 put, O_EXCL/link locally ----------------------------------


class RecordingProxy(FaultProxy):
    """The tests' HTTP proxy in front of the real MinIO, remembering every PUT and its headers."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.puts: list[tuple[str, dict[str, str]]] = []

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        parent, proxy = super()._handler(), self

        class Recording(parent):  # type: ignore[misc,valid-type]
            def do_PUT(self) -> None:
                with proxy._lock:
                    proxy.puts.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                parent.do_PUT(self)

        return Recording


@pytest.mark.parametrize("version", [2, 1], ids=["format2", "format1"])
def test_every_write_once_put_is_conditional(
    minio: MinioServer,
    minio_env: dict[str, str],
    s3_store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    version: int,
) -> None:
    """Before: chunks and packs were plain PUTs, so a bucket policy requiring If-None-Match would refuse
    backups, and racing writers could replace each other's objects. After: only a lock's refresh replaces."""
    from drtool.prune import prune
    from drtool.repo.config import StoreConfig
    from drtool.repo.lock import acquire
    from drtool.retention import RetentionPolicy
    from tests.store.test_prune import backup_files

    proxy = RecordingProxy(minio.api_url).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        repo = Repository.init(
            open_backend(s3_store_url), passphrase=PASSPHRASE, config=StoreConfig.new(version=version)
        )
        for seed in range(3):
            backup_files(repo, tmp_path / "src", noise(3 * MIB, seed), "s")
        prune(repo, {"s": RetentionPolicy(keep_last=1)})
        with acquire(repo, "shared", "test") as lock:
            lock._write(lock.info, exclusive=False)  # what a refresh does
    finally:
        proxy.stop()
    plain = sorted(
        {path.split("/", 3)[-1].split("/")[0] for path, headers in proxy.puts if "if-none-match" not in headers}
    )
    kinds = sorted({path.split("/", 3)[-1].split("/")[0] for path, _ in proxy.puts})
    print(f"\nPUTs: {len(proxy.puts)} to {kinds}; without If-None-Match: {plain}")
    assert plain == ["locks"]
    assert {"keys", "keyring", "manifests", "drtool-store.json"} <= set(kinds)


# --- 3. key rotation ---------------------------------------------------------------------------------------

NEW_PASSPHRASE = "a new passphrase after the leak"


def test_rotation_locks_old_key_material_out_of_new_backups(actors: Actors, site: Site) -> None:
    """Before: `drtool key remove` left the master key as it was, and a surviving copy of the removed slot
    (an old object version) let the old key file read every later backup. After `drtool key rotate`, old
    key files, old shares and the old passphrase read nothing written after the rotation, and drtool
    refuses to write with them; the new credentials read old and new backups."""
    actors.init()
    shares = actors.cli.home / "shares.txt"
    actors.operator("key", "recovery-shares", "-k", "2", "-n", "3", "--out", str(shares), check=True)
    before = actors.backup()
    again = json.loads(actors.cronjob("show", actors.backup(), "--json", check=True).stdout)["stats"]
    admin = site.backend("admin")
    old_slots = {name: admin.get(name) for name in admin.list(layout.KEYS)}  # what a versioned bucket keeps

    new_keyfile = actors.cli.home / "new-cronjob.key"
    rotated = actors.operator(
        "key", "rotate", "--passphrase", "--keyfile", str(new_keyfile), env={"DRTOOL_NEW_PASSPHRASE": NEW_PASSPHRASE}
    )
    assert rotated.returncode == 0, rotated.stderr
    assert "key generation 1" in rotated.stdout, rotated.stdout
    assert set(admin.list(layout.KEYS)).isdisjoint(old_slots)
    new_env = {"DRTOOL_KEYFILE": str(new_keyfile)}
    after = json.loads(actors.cronjob("backup", "--set", "nightly", "--json", env=new_env, check=True).stdout)
    print(
        f"\nsecond backup of the same data: {again['bytes_stored']} B stored ({again['chunks_new']} new chunks); "
        f"first after the rotation: {after['stats']['bytes_stored']} B ({after['stats']['chunks_new']} new chunks)"
    )
    assert again["chunks_new"] == 0 and after["stats"]["chunks_new"] == after["stats"]["chunks"]

    for name, data in old_slots.items():  # the old slots come back, as an attacker with old versions would
        admin.put(name, data)
    old_credentials = {
        "old key file": {},
        "old recovery shares": {"DRTOOL_KEYFILE": None, "DRTOOL_RECOVERY_SHARES_FILE": str(shares)},
    }
    for what, env in old_credentials.items():
        newer = actors.cronjob("show", after["id"], "--json", env=env)
        assert newer.returncode == 4 and "after this key was retired" in newer.stderr.splitlines()[-1], newer.stderr
        assert json.loads(actors.cronjob("show", before, "--json", env=env, check=True).stdout)["id"] == before
        refused = actors.cronjob("backup", "--set", "nightly", env=env)
        assert refused.returncode == 5 and "THIS KEY WAS RETIRED" in refused.stderr, refused.stderr
        assert "retired" in refused.stderr.splitlines()[-1] and "Traceback" not in refused.stderr
        print(f"{what}: reads {before}, not {after['id']}; backup refused: {refused.stderr.strip()}")
    old_passphrase = actors.operator("show", after["id"], env={"DRTOOL_STATE_DIR": None} | actors.fresh_machine())
    assert old_passphrase.returncode == 4, old_passphrase.stderr
    for backup_id in (before, after["id"]):
        shown = actors.operator("show", backup_id, "--json", env={"DRTOOL_PASSPHRASE": NEW_PASSPHRASE}, check=True)
        assert json.loads(shown.stdout)["key_generation"] == (0 if backup_id == before else 1)
    restored = actors.cli.home / "restored"
    actors.cronjob("restore", before, "-p", "files", "-t", f"path={restored}", env=new_env, check=True)
    assert [p.read_bytes() for p in restored.rglob("model.bin")] == [random.Random(15).randbytes(2 * MIB)]


def test_a_retired_key_cannot_slip_a_backup_in(actors: Actors, site: Site) -> None:
    """A holder of the old key (the leak the rotation answers) writes a manifest with honest times after the
    rotation: it is never listed as a backup, never `latest`, and `check` names it."""
    actors.init()
    genuine = actors.backup()
    with environ(site.writer):
        leaked = Repository.open(site.backend(), Credentials(keyfile_secret=_keyfile_secret(actors.keyfile)))
    template = leaked.get_manifest(genuine)
    new_keyfile = actors.cli.home / "new-cronjob.key"
    new_passphrase = {"DRTOOL_NEW_PASSPHRASE": NEW_PASSPHRASE}  # its slot keeps the owner key
    actors.operator("key", "rotate", "--passphrase", "--keyfile", str(new_keyfile), env=new_passphrase, check=True)
    forged = forge(leaked, template, dt.datetime.now(dt.UTC), site.backend())
    latest = actors.cronjob("show", "latest", "--json", env={"DRTOOL_KEYFILE": str(new_keyfile)}, check=True)
    assert json.loads(latest.stdout)["id"] == genuine
    checked = actors.operator("check", "--json", env={"DRTOOL_KEYFILE": str(new_keyfile)})
    assert checked.returncode == 4
    assert "retired before it was written" in json.loads(checked.stdout)["bad_manifests"][forged]


# --- planted and replaced key records; stores from before key records ---------------------------------------


def test_a_replaced_store_key_record_is_refused_pinned_or_not(actors: Actors, site: Site) -> None:
    """An attacker without the key replaces the store's key record with one for a key of theirs and plants a
    slot for it under a guessed passphrase: a machine that pinned the store refuses it, and so does a new
    machine (the attacker's key does not open the store's oldest backups)."""
    store_id = actors.init()
    actors.backup()
    attacker = MasterKey(secrets.token_bytes(32), store_id)
    backend = site.backend()
    from drtool.repo import keyring

    backend.put("keyring/0000", json.dumps(keyring.root_record(attacker, backend.get(layout.CONFIG), "x")).encode())
    plant_passphrase_slot(backend, store_id, "00000000", PASSPHRASE, attacker.secret_for_ring(), DEFAULT_KDF)
    for env in ({}, actors.fresh_machine()):
        proc = actors.operator("backup", "--set", "nightly", env=env)
        assert_clean_error(proc, 5, "not with this store's key", "00000000")


def test_a_malformed_key_record_is_named_and_ignored(actors: Actors, site: Site) -> None:
    actors.init()
    site.backend().put(f"keyring/0001-{'0' * 32}", b"{not json")
    proc = actors.operator("list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert any("keyring/0001" in line for line in warnings(proc.stderr)), proc.stderr


V1_STORE = Path(__file__).parents[1] / "data" / "store-v1"
V1_PASSPHRASE = "v1 store passphrase"


def _v1_copy(tmp_path: Path) -> Backend:
    copy = tmp_path / "v1-store"
    shutil.copytree(V1_STORE, copy)
    return open_backend(str(copy))


def test_a_store_from_before_key_records_binds_its_key_at_first_open(tmp_path: Path) -> None:
    """docs/threat-model.md: a store written by drtool 0.1 gets its key record when a key holder first opens
    it; from then on a planted slot is refused like in any other store."""
    from drtool.repo import keyring
    from drtool.repo.pins import PinStore

    backend = _v1_copy(tmp_path)
    repo = Repository.open(backend, Credentials(passphrase=V1_PASSPHRASE), pins=PinStore(tmp_path / "pins-a"))
    assert backend.exists("keyring/0000") and repo.trust.gear == keyring.GEAR_SEED32
    assert oct((tmp_path / "pins-a" / f"{repo.config.store_id}.json").stat().st_mode & 0o777) == "0o600"
    plant_passphrase_slot(backend, repo.config.store_id, "00000000", V1_PASSPHRASE, os.urandom(32), DEFAULT_KDF)
    again = Repository.open(backend, Credentials(passphrase=V1_PASSPHRASE), pins=PinStore(tmp_path / "pins-b"))
    assert again.key == repo.key
    assert [w for w in again.warnings if "key slot 00000000 ignored" in w]


def test_a_slot_planted_before_the_first_open_is_not_bound(tmp_path: Path) -> None:
    """The residual risk of a store without key records: a slot planted before its first open. Two keys
    behind one passphrase are refused; a lone planted key that does not open the backups is refused."""
    from drtool.repo.pins import PinStore

    backend = _v1_copy(tmp_path)
    store_id = json.loads(backend.get(layout.CONFIG))["store_id"]
    plant_passphrase_slot(backend, store_id, "00000000", V1_PASSPHRASE, os.urandom(32), DEFAULT_KDF)
    with pytest.raises(IntegrityError, match="open different keys"):
        Repository.open(backend, Credentials(passphrase=V1_PASSPHRASE), pins=PinStore(tmp_path / "pins"))
    plant_passphrase_slot(backend, store_id, "00000001", "a guessed passphrase", os.urandom(32), DEFAULT_KDF)
    with pytest.raises(IntegrityError, match="oldest backups"):
        Repository.open(backend, Credentials(passphrase="a guessed passphrase"), pins=PinStore(tmp_path / "pins"))
    assert not backend.exists("keyring/0000")


# --- 5. files on this machine, and core dumps ------------------------------------------------------------------


def test_local_store_catalog_key_and_share_files_are_private(actors: Actors, site: Site, tmp_path: Path) -> None:
    if site.kind != "local":
        pytest.skip("file modes are the local backend's")
    actors.init()
    actors.backup()
    shares = actors.cli.home / "shares.txt"
    actors.operator("key", "recovery-shares", "-k", "2", "-n", "3", "--out", str(shares), check=True)
    actors.operator("list", check=True)
    root = Path(site.url)
    modes = {p: p.stat().st_mode & 0o777 for p in root.rglob("*")}
    assert {oct(m) for p, m in modes.items() if p.is_dir()} == {"0o700"}, modes
    assert {oct(m) for p, m in modes.items() if p.is_file()} == {"0o600"}, modes
    for private in (actors.keyfile, shares, actors.cli.home / "catalog.db"):
        assert oct(private.stat().st_mode & 0o777) == "0o600", private
    (actors.cli.home / "planted").symlink_to(tmp_path / "elsewhere")
    for target in (shares, actors.cli.home / "planted"):
        refused = actors.operator("key", "recovery-shares", "-k", "2", "-n", "3", "--out", str(target))
        assert_clean_error(refused, 2, "already exists")
    assert not (tmp_path / "elsewhere").exists()


def test_a_process_holding_a_key_makes_no_core_dump(tmp_path: Path) -> None:
    script = (
        "import resource, sys\n"
        "from drtool.crypto import process_guard\n"
        "from drtool.backends import open_backend\n"
        "from drtool.repo.repository import Repository\n"
        "import json\n"
        "before = process_guard.dumpable()\n"
        f"Repository.init(open_backend({str(tmp_path / 's')!r}), passphrase='a passphrase 123')\n"
        "print(json.dumps([before, resource.getrlimit(resource.RLIMIT_CORE), process_guard.dumpable()]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == [True, [0, 0], False], proc.stdout


# --- 4. the chunker secret -------------------------------------------------------------------------------------


def test_new_stores_cut_with_a_keyed_table_and_old_ones_keep_their_cut_points(tmp_path: Path) -> None:
    from drtool.repo import keyring
    from drtool.repo.chunker import StreamChunker
    from drtool.repo.pins import PinStore
    from drtool.repo.writer import BackupSession

    data = random.Random(4).randbytes(24 * MIB)
    repo = Repository.init(open_backend(str(tmp_path / "new")), passphrase=PASSPHRASE)
    assert repo.trust.gear == keyring.GEAR_KEYED
    permutation, seed = repo.gear
    assert permutation is not None and sorted(permutation) == list(range(256)) and seed.bit_length() > 32

    def cuts(gear: tuple[bytes | None, int]) -> list[int]:
        chunker = StreamChunker(repo.config.chunker, gear)
        return [len(c) for c in chunker.feed(data) + chunker.finish()]

    keyed, seeded = cuts(repo.gear), cuts((None, seed))
    assert sum(keyed) == sum(seeded) == len(data) and keyed != seeded and len(keyed) > 8

    v1 = Repository.open(_v1_copy(tmp_path), Credentials(passphrase=V1_PASSPHRASE), pins=PinStore(tmp_path / "p"))
    assert v1.gear == (None, v1.key.chunker_seed)
    with BackupSession(v1) as session:  # the fixture's artifact again: its one chunk is found, none is new
        with session.context_for("test").artifact("data.bin") as sink:
            sink.write(_v1_data())
        manifest = session.commit()
    assert manifest.stats["chunks_new"] == 0 and manifest.stats["chunks"] == 1


def _v1_data() -> bytes:
    from tests.store.test_store_v1 import _data

    return _data()


# --- slot settings, checked before any KDF runs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kdf", "reason"),
    [
        ({"memory_kib": 8, "iterations": 1, "lanes": 1}, "memory_kib 8 is outside"),
        ({"memory_kib": 65536, "iterations": 1, "lanes": 4}, "memory x iterations"),
        ({"memory_kib": 4 * 1048576, "iterations": 1, "lanes": 4}, "memory_kib 4194304 is outside"),
        ({"memory_kib": 1048576, "iterations": 3, "lanes": 4}, "memory x iterations"),
        ({"memory_kib": 65536, "iterations": 3, "lanes": 0}, "lanes 0 is outside"),
        ({"memory_kib": 65536, "iterations": True, "lanes": 4}, "iterations True"),
        ({"memory_kib": 65536, "iterations": 3, "lanes": 4}, None),
        ({"memory_kib": 2097152, "iterations": 1, "lanes": 4}, None),
    ],
)
def test_argon2_settings_are_bounded(kdf: dict[str, Any], reason: str | None) -> None:
    from drtool.crypto.slots import KeySlot, check_slot

    salt = base64.b64encode(os.urandom(16)).decode()
    slot = KeySlot("0a0b0c0d", "passphrase", "x", "now", {"name": "argon2id", "salt": salt, **kdf}, "A" * 80)
    problem = check_slot(slot)
    assert (problem is None) if reason is None else (problem is not None and reason in problem), problem


def test_a_plan_steps_process_reads_backups_of_a_retired_key(tmp_path: Path) -> None:
    """A plan step's process gets the current key through a pipe (drtool/plans/step_process.py) and finds the
    retired keys in the store's keyring itself."""
    from drtool.plans.step_process import HANDOVER_SLOT
    from drtool.repo.restore_context import PluginRestoreContext
    from drtool.repo.rotate import rotate
    from drtool.repo.writer import BackupSession

    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    with BackupSession(repo) as session:
        with session.context_for("test").artifact("a") as sink:
            sink.write(b"written under generation 0")
        old = session.commit()
    rotated = rotate(repo, passphrase=NEW_PASSPHRASE).repo
    one_time = os.urandom(32)
    sealed = rotated.key.wrap(one_time, HANDOVER_SLOT)
    handed = MasterKey.unwrap(one_time, sealed, rotated.config.store_id, HANDOVER_SLOT)
    child = Repository(open_backend(rotated.backend.url), rotated.config, handed, None)
    assert child.trust.generation == 1 and child.gear[0] is not None
    with PluginRestoreContext(child, child.get_manifest(old.id), "test").open("a") as source:
        assert source.read() == b"written under generation 0"


def test_a_local_writer_cannot_back_date_a_manifest_with_utime(tmp_path: Path) -> None:
    """Locally the store's clock is the inode change time: `touch -d` moves the modification time only."""
    from drtool.repo.writer import BackupSession

    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    with BackupSession(repo) as session:
        genuine = session.commit()
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    forged = forge(repo, repo.get_manifest(genuine.id), when, repo.backend)
    os.utime(tmp_path / "store" / layout.manifest(forged), (when.timestamp(), when.timestamp()))
    assert repo.get_manifest(genuine.id).trusted
    assert "back-dated" in (repo.get_manifest(forged).flag or "")


@pytest.mark.parametrize(
    ("offsets", "flag"),
    [
        ({}, None),
        ({"finished": 4 * 60, "started": -3600 * 5}, None),  # a long backup, a little clock skew
        ({"finished": 10 * 60}, "dated in the future"),
        ({"finished": -10 * 60}, "back-dated"),
        ({"started": 10 * 60, "finished": 0}, "started after it finished"),
        ({"chain": 10 * 60}, "chain position is dated after"),
    ],
)
def test_which_stated_times_are_flagged(offsets: dict[str, int], flag: str | None) -> None:
    from drtool.repo.times import suspicion

    stored = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)

    def at(name: str) -> str:
        return (stored + dt.timedelta(seconds=offsets.get(name, 0))).isoformat()

    backup_id = f"{stored + dt.timedelta(seconds=offsets.get('started', 0)):%Y%m%dT%H%M%SZ}-abcdef"
    chain = at("chain") if "chain" in offsets else None
    found = suspicion(backup_id, at("started"), at("finished"), stored, chain_time=chain)
    assert (found is None) if flag is None else (found is not None and flag in found), found
