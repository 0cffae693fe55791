"""Attack 2 of issue 25: the CronJob's identity (its key file and write-only store credentials) tries to take
the store's key over by rotating it, and the operators must keep their backups and hear about it.

The attacker here holds what the shipped CronJob holds: the key file, and store credentials that can write
but not delete (locally: the test puts back every slot a rotation deleted, as a bucket that cannot delete
keeps them). It never holds the passphrase, which alone opens the store owner's signing key
(drtool/crypto/owner.py). Every attack is written from primitives the store format defines, not from
drtool's own rotation code, so the same attack runs against drtool before and after the fix.
docs/threat-model.md ("The CronJob's identity") names these tests.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from drtool.backends import open_backend
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import KEYRING, MasterKey
from drtool.repo import layout
from drtool.repo.config import StoreConfig
from drtool.repo.pins import PinStore
from drtool.repo.repository import Repository
from tests.e2e.test_manifests import container, pod_env, pod_files
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.manifests import MANIFESTS, helm_template, kubectl, parse

MIB = 1024 * 1024
SETS = {"nightly": {"plugins": ["files"], "cron": "0 2 * * *"}}
NEW_PASSPHRASE = "the owner's passphrase after the rotation"
EXAMPLE_KEY_CHECK = "0123456789abcdef0123456789abcdef"  # manifests/overlays/production/store-key.yaml


class Site:
    """A local store, the operator (passphrase) and the CronJob (key file, no passphrase) that use it."""

    def __init__(self, cli: Cli, tmp_path: Path, version: int = 2) -> None:
        self.cli, self.store = cli, tmp_path / "store"
        self.keyfile = cli.home / "cronjob.key"
        data = tmp_path / "data"
        data.mkdir()
        (data / "model.bin").write_bytes(random.Random(25).randbytes(MIB))
        config = cli.home / ".config/drtool/config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text(
            yaml.safe_dump(
                {"store": str(self.store), "sources": {"files": {"paths": [str(data)]}}, "backup_sets": SETS}
            )
        )
        secret = slots.new_keyfile_text()[1]
        repo = Repository.init(
            open_backend(str(self.store)),
            passphrase=PASSPHRASE,
            keyfile_secret=secret,
            config=StoreConfig.new(version=version),
            pins=PinStore(cli.home / "operator-pins"),
        )
        self.keyfile.write_text(slots.keyfile_text(secret, repo.key))
        self.store_id, self.key_check = repo.config.store_id, repo.key.key_check

    def operator(self, *args: str, env: dict[str, str | None] | None = None, **kwargs: Any) -> Any:
        """The operator, on a machine that has never opened the store (no pins): the hardest case."""
        fresh = {"DRTOOL_STATE_DIR": str(self.cli.home / f"operator-{random.random()}")}
        return self.cli(*args, env={**fresh, **(env or {})}, **kwargs)

    def cronjob(self, *args: str, env: dict[str, str | None] | None = None, **kwargs: Any) -> Any:
        """The CronJob's pod: its key file, no passphrase, and no pins kept between runs."""
        pod = {"DRTOOL_PASSPHRASE": None, "DRTOOL_KEYFILE": str(self.keyfile)}
        fresh = {"DRTOOL_STATE_DIR": str(self.cli.home / f"pod-{random.random()}")}
        return self.cli(*args, env={**pod, **fresh, **(env or {})}, **kwargs)

    def backup(self, **kwargs: Any) -> Any:
        return self.cronjob("backup", "--set", "nightly", "--json", **kwargs)

    def slots_kept(self) -> dict[str, bytes]:
        """The key slots now: what a bucket without delete permission keeps whatever a rotation deletes."""
        return {p.name: p.read_bytes() for p in (self.store / "keys").iterdir()}

    def put_back(self, kept: dict[str, bytes]) -> None:
        for name, data in kept.items():
            (self.store / "keys" / name).write_bytes(data)

    def cronjob_key(self) -> MasterKey:
        """The master key the CronJob's key file opens (the attacker's starting point)."""
        secret = slots.read_keyfile(self.keyfile.read_text(), "cronjob.key")
        opened = Repository.open(open_backend(str(self.store)), Credentials(keyfile_secret=secret.secret),
                                 pins=PinStore(None))  # fmt: skip
        return opened.key


def _canonical(record: dict[str, Any]) -> bytes:
    body = copy.deepcopy(record)
    for field in ("mac", "owner_sig"):
        body.pop(field, None)
    body.get("retires", {}).pop("mac", None)
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def forge_rotation(site: Site, old: MasterKey, owner: Ed25519PrivateKey | None = None) -> MasterKey:
    """The attacker's rotation, written as docs/store-format.md describes a rotation record: a new master key
    of generation 1 holding the old one, MACed under both keys (the attacker holds both), signed by
    ``owner`` when given (an owner key of the attacker's own); then a slot of the new key that the
    CronJob's own key file opens. Returns the new key, which only the attacker holds."""
    store = open_backend(str(site.store))
    new = MasterKey.generate(site.store_id)
    name = f"keyring/0001-{new.key_check}"
    ring = {"keys": [{"generation": 0, "secret": base64.b64encode(old.secret_for_ring()).decode()}]}
    root = json.loads(store.get("keyring/0000"))
    record: dict[str, Any] = {
        "version": 1,
        "store_id": site.store_id,
        "generation": 1,
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "key_check": new.key_check,
        "gear": "permuted-v1",
        "ring": base64.b64encode(new.seal(KEYRING, name, json.dumps(ring).encode())).decode(),
        "sealed": {
            "manifests": sorted(i for n in store.list(layout.MANIFESTS) if (i := layout.backup_id_of(n))),
            "indexes": sorted(i for n in store.list(layout.INDEX) if (i := layout.index_id_of(n))),
        },
        "retires": {"generation": 0, "key_check": old.key_check},
        "previous_sha256": hashlib.sha256(json.dumps(root, sort_keys=True, separators=(",", ":")).encode()).hexdigest(),
        "config_sha256": root["config_sha256"],
    }
    body = _canonical(record)
    if owner is not None:
        record["owner_sig"] = base64.b64encode(owner.sign(body)).decode()
    record["retires"]["mac"] = old.mac("keyring-retires", body)
    record["mac"] = new.mac("keyring-record", body)
    store.put(name, json.dumps(record).encode(), exclusive=True)
    secret = slots.read_keyfile(site.keyfile.read_text(), "cronjob.key").secret
    planted = slots.keyfile_slot(new, secret, "key file")
    store.put(layout.key_slot(planted.id), planted.to_bytes(), exclusive=True)
    return new


def replace_root(site: Site, key: MasterKey, owner: Ed25519PrivateKey) -> None:
    """Where the store lets a writer replace an object (a local folder, a bucket without Object Lock), the
    first key record is rewritten to name the attacker's owner key, MACed with the master key it holds."""
    path = site.store / "keyring" / "0000"
    root = json.loads(path.read_text())
    root["owner"] = base64.b64encode(owner.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    root["mac"] = key.mac("keyring-record", _canonical(root))
    path.write_text(json.dumps(root))


def generation_of(site: Site, backup_id: str, who: str = "operator") -> int:
    shown = getattr(site, who)("show", backup_id, "--json", check=True)
    return int(json.loads(shown.stdout)["key_generation"])


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("drtool: warning: ")]


@pytest.fixture
def site(cli: Cli, tmp_path: Path) -> Site:
    return Site(cli, tmp_path)


# --- the rotation itself --------------------------------------------------------------------------------


def test_the_cronjobs_key_file_cannot_rotate(site: Site) -> None:
    """Before: `drtool key rotate` with the CronJob's key file made generation 1. After: refused, one line
    naming the owner credential it needs; nothing is written (no record, no slot, no new key file)."""
    kept = site.slots_kept()
    new_keyfile = site.cli.home / "attacker.key"
    refused = site.cronjob(
        "key", "rotate", "--keyfile", str(new_keyfile), env={"DRTOOL_NEW_PASSPHRASE": "attacker's own"}
    )
    print(f"\nkey rotate with the CronJob's key file: {refused.stderr.strip() or refused.stdout.strip()}")
    assert_clean_error(refused, 5, "owner's credential")
    assert sorted((site.store / "keyring").iterdir()) == [site.store / "keyring" / "0000"]
    assert site.slots_kept() == kept and not new_keyfile.exists()
    # a passphrase slot the key file adds is no owner credential: it holds the master key, not the owner key
    own = {"DRTOOL_NEW_PASSPHRASE": "the attacker's own passphrase"}
    site.cronjob("key", "add", "--passphrase", env=own, check=True)
    via_own = site.operator(
        "key", "rotate", "--keyfile", str(new_keyfile), env={"DRTOOL_PASSPHRASE": own["DRTOOL_NEW_PASSPHRASE"]}
    )
    assert_clean_error(via_own, 5, "owner's credential")
    assert sorted((site.store / "keyring").iterdir()) == [site.store / "keyring" / "0000"]


def test_a_planted_rotation_and_key_file_slot_are_ignored(site: Site) -> None:
    """Before: a rotation record written with the master key alone and a slot of the new key that the
    CronJob's key file opens made every later backup unreadable to the operators. After: the record is not
    signed by the owner key, so it is ignored (one warning naming it), and so is the key its slot opens (not
    named by any owner-signed record; tried only if the genuine slot did not open); the CronJob keeps
    backing up under generation 0, which the operators' passphrase reads."""
    before = json.loads(site.backup(check=True).stdout)["id"]
    kept_before = site.slots_kept()
    forge_rotation(site, site.cronjob_key())
    ran = site.backup()
    assert ran.returncode == 0, ran.stderr
    after = json.loads(ran.stdout)["id"]
    print("\nCronJob after the planted rotation:\n" + "\n".join(warnings(ran.stderr)))
    assert any("keyring/0001-" in w and "not signed by the store's owner key" in w for w in warnings(ran.stderr))
    assert generation_of(site, after) == 0 and generation_of(site, before) == 0
    genuine = {n: d for n, d in site.slots_kept().items() if b'"keyfile"' in d and n in kept_before}
    for name in genuine:  # the planted slot alone: its key is named by no owner-signed record
        (site.store / "keys" / name).unlink()
    alone = site.backup()
    print(f"the planted slot alone: {alone.stderr.strip()}")
    assert_clean_error(alone, 5, "not with this store's key")
    site.put_back(genuine)
    listed = site.operator("list", "--json", check=True)
    assert {b["id"] for b in json.loads(listed.stdout)} >= {before, after}
    assert any("not signed by the store's owner key" in w for w in warnings(listed.stderr)), listed.stderr


def test_the_operators_passphrase_reads_the_pre_attack_backup(site: Site) -> None:
    """Before: after the hijack the operators' passphrase opened only the key the attacker had retired, and
    format 2 then failed on the attacker's index ("index ... failed authentication"), even for the backup
    written before the attack. After: the passphrase opens the store's current key and restores it."""
    before = json.loads(site.backup(check=True).stdout)["id"]
    forge_rotation(site, site.cronjob_key())
    site.backup(check=True)  # the CronJob's next run, under whichever key it now chooses
    restored = site.cli.home / "restored"
    done = site.operator("restore", before, "-p", "files", "-t", f"path={restored}")
    assert done.returncode == 0, done.stderr
    assert [p.read_bytes() for p in restored.rglob("model.bin")] == [random.Random(25).randbytes(MIB)]


# --- what the CronJob's spec carries ---------------------------------------------------------------------


def test_the_cronjob_refuses_a_key_it_does_not_expect(site: Site) -> None:
    """Where a writer can replace the first key record (a local store, a bucket without Object Lock), it can
    name an owner key of its own and sign its own rotation. A pod keeps no pins; the CronJob's spec names
    the key it expects (DRTOOL_EXPECT_KEY_CHECK, DRTOOL_EXPECT_KEY_GENERATION) and drtool writes under that
    key or not at all. Before: the variables were ignored and the backup went to the attacker's key."""
    status = json.loads(site.operator("key", "status", "--json", check=True).stdout)
    assert (status["key_check"], status["generation"], status["retired_by"]) == (site.key_check, 0, None)
    assert status["owner_key"] and status["owner_credential"]
    expect = {"DRTOOL_EXPECT_KEY_CHECK": status["key_check"], "DRTOOL_EXPECT_KEY_GENERATION": "0"}
    genuine = json.loads(site.backup(env=expect, check=True).stdout)["id"]
    old = site.cronjob_key()
    attacker = Ed25519PrivateKey.generate()
    replace_root(site, old, attacker)
    forge_rotation(site, old, owner=attacker)
    ran = site.backup(env=expect)
    print(f"\nCronJob expecting generation 0 after a signed hijack: {ran.stderr.strip()}")
    assert ran.returncode == 5 and "retired" in ran.stderr, ran.stderr
    assert "THIS KEY WAS RETIRED" in ran.stderr
    assert [layout.backup_id_of(f"manifests/{p.name}") for p in (site.store / "manifests").iterdir()] == [genuine]
    moved = site.backup(env={"DRTOOL_EXPECT_KEY_CHECK": site.key_check, "DRTOOL_EXPECT_KEY_GENERATION": "1"})
    assert_clean_error(moved, 4, "this deployment expects")
    unset = site.backup(env={"DRTOOL_EXPECT_KEY_CHECK": "set-me", "DRTOOL_EXPECT_KEY_GENERATION": "0"})
    assert_clean_error(unset, 2, "DRTOOL_EXPECT_KEY_CHECK")
    owner = site.operator("list")
    assert_clean_error(owner, 4, "keyring/0000 was replaced")
    print(f"operator's passphrase on the same store: {owner.stderr.strip()}")


# --- a legitimate rotation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_a_retired_key_reads_what_it_wrote_and_says_it_was_retired(cli: Cli, tmp_path: Path, version: int) -> None:
    """The owner rotates (passphrase); the CronJob's old key file survives in a bucket that keeps old slots.
    Before: format 2 loaded every index object and failed on the new generation's ("index ... failed
    authentication"), and nothing told the old key's holder it was retired. After: the old key lists and
    restores the backups written before the rotation (both formats), never the later ones, and every
    command says loudly that it was retired."""
    site = Site(cli, tmp_path, version)
    before = json.loads(site.backup(check=True).stdout)["id"]
    kept = site.slots_kept()
    new_keyfile = cli.home / "new-cronjob.key"
    rotated = site.operator(
        "key", "rotate", "--passphrase", "--keyfile", str(new_keyfile), env={"DRTOOL_NEW_PASSPHRASE": NEW_PASSPHRASE}
    )
    assert rotated.returncode == 0, rotated.stderr
    after = json.loads(site.backup(env={"DRTOOL_KEYFILE": str(new_keyfile)}, check=True).stdout)["id"]
    site.put_back(kept)

    listed = site.cronjob("list", "--json")
    assert listed.returncode == 0, listed.stderr
    print(f"\nformat {version}, the old key file: " + "\n".join(warnings(listed.stderr)))
    assert [b["id"] for b in json.loads(listed.stdout)] == [before]
    assert any("THIS KEY WAS RETIRED" in w for w in warnings(listed.stderr))
    restored = cli.home / "restored"
    done = site.cronjob("restore", before, "-p", "files", "-t", f"path={restored}")
    assert done.returncode == 0, done.stderr
    assert [p.read_bytes() for p in restored.rglob("model.bin")] == [random.Random(25).randbytes(MIB)]
    refused = site.cronjob("backup", "--set", "nightly")
    assert refused.returncode == 5 and "retired" in refused.stderr.splitlines()[-1], refused.stderr
    assert site.cronjob("show", after).returncode != 0
    owner = {"DRTOOL_PASSPHRASE": NEW_PASSPHRASE}
    for backup_id, generation in ((before, 0), (after, 1)):
        shown = site.operator("show", backup_id, "--json", env=owner, check=True)
        assert json.loads(shown.stdout)["key_generation"] == generation


# --- the shipped CronJobs and Helm chart -----------------------------------------------------------------


def shipped_cronjobs(rendering: str, tmp_path: Path, key_check: str | None) -> dict[str, dict[str, Any]]:
    """The backup CronJobs as an operator deploys them: the production overlay with its store-key.yaml set to
    the store's key (kubectl kustomize), or the chart with `store.keyCheck` in a values file (helm template);
    ``key_check`` None: as shipped, with the placeholders."""
    if rendering == "helm":
        tmp_path.mkdir(parents=True)
        values = tmp_path / "values.yaml"
        values.write_text(yaml.safe_dump({"store": {"keyCheck": key_check}} if key_check else {}))
        docs = parse(helm_template(str(values)))
    else:
        copy_of = tmp_path / "manifests"
        shutil.copytree(MANIFESTS, copy_of)
        patch = copy_of / "overlays/production/store-key.yaml"
        patch.write_text(patch.read_text().replace(EXAMPLE_KEY_CHECK, key_check or "set-me-from-drtool-key-status"))
        proc = kubectl("kustomize", str(copy_of / "overlays/production"))
        assert proc.returncode == 0, proc.stderr
        docs = parse(proc.stdout)
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "CronJob" and "backup" in d["metadata"]["name"]}


def run_backup_pod(site: Site, tmp_path: Path, cronjob: dict[str, Any]) -> Any:
    """The CronJob's own command line with its own environment, its key Secret holding the key file, a fresh
    pod (no pins), the store at ``site``."""
    name = f"{cronjob['metadata']['name']}-{random.random()}"
    sources = {"files": {"paths": [str(tmp_path)]}}
    config = {
        "store": str(site.store),
        "sources": sources,
        "backup_sets": {name: copy.deepcopy(SETS["nightly"]) for name in ("cluster", "etcd")},
    }
    files = pod_files(tmp_path, name, config, {"key": {"keyfile": site.keyfile.read_text()}, "store": {"x": ""}})
    args = [a for a in container(cronjob)["args"] if a != "--pushgateway" and ":9091" not in a]
    env = pod_env(cronjob, files)
    return subprocess.run([sys.executable, "-m", "drtool", *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("rendering", ["kustomize", "helm"])
def test_shipped_cronjobs_name_their_key_and_refuse_hijacks(site: Site, tmp_path: Path, rendering: str) -> None:
    """Before: the shipped CronJobs opened the store with the passphrase (the owner's credential) and named no
    key, so a pod, which keeps no pins, followed whatever generation the store's records named. After: they
    hold a key file, and carry DRTOOL_EXPECT_KEY_CHECK and _GENERATION; as shipped (placeholders) the pod
    refuses to run, and with the store's key set, a hijacked store (first record replaced, a rotation signed
    by the attacker's owner key, a slot the pod's key file opens) is refused and nothing is written."""
    for name, cronjob in shipped_cronjobs(rendering, tmp_path / "as-shipped", None).items():
        env = {e["name"]: e.get("value") for e in container(cronjob)["env"]}
        assert "DRTOOL_KEYFILE" in env and not {"DRTOOL_PASSPHRASE", "DRTOOL_PASSPHRASE_FILE"} & set(env), name
        refused = run_backup_pod(site, tmp_path, cronjob)
        assert_clean_error(refused, 2, "DRTOOL_EXPECT_KEY_CHECK")
    print(f"\n{rendering}, as shipped: {refused.stderr.strip()}")

    deployed = shipped_cronjobs(rendering, tmp_path / "deployed", site.key_check)
    for name, cronjob in deployed.items():
        env = {e["name"]: e.get("value") for e in container(cronjob)["env"]}
        assert (env["DRTOOL_EXPECT_KEY_CHECK"], env["DRTOOL_EXPECT_KEY_GENERATION"]) == (site.key_check, "0"), name
    old = site.cronjob_key()
    attacker = Ed25519PrivateKey.generate()
    replace_root(site, old, attacker)
    forge_rotation(site, old, owner=attacker)
    refused = run_backup_pod(site, tmp_path, deployed["drtool-backup-cluster"])
    print(f"{rendering}, with the store's key, on a hijacked store: {refused.stderr.strip().splitlines()[-1]}")
    assert refused.returncode == 5 and "retired" in refused.stderr.splitlines()[-1], refused.stderr
    assert not list((site.store / "manifests").glob("*"))


# --- a store made before owner keys ----------------------------------------------------------------------


def test_a_store_made_before_owner_keys_gets_one_with_owner_init(cli: Cli, tmp_path: Path) -> None:
    """A store whose first key record names no owner key (made before them) follows any rotation its key
    records' MACs allow: the CronJob's hand-written one included (trust on first use, as before).
    `drtool key owner-init`, run with the passphrase, writes keyring/owner; from then on the attack is
    ignored as in a new store. The CronJob's key file cannot run it, and it runs once."""
    site = Site(cli, tmp_path)
    legacy = tmp_path / "legacy"  # the same store as drtool before owner keys would have made it
    secret = slots.read_keyfile(site.keyfile.read_text(), "cronjob.key").secret
    repo = Repository.init(open_backend(str(legacy)), keyfile_secret=secret, pins=PinStore(None))
    repo.add_slot(slots.passphrase_slot(repo.key, PASSPHRASE))
    shutil.rmtree(site.store)
    legacy.rename(site.store)
    site.store_id, site.key_check = repo.config.store_id, repo.key.key_check
    site.keyfile.write_text(slots.keyfile_text(secret, repo.key))
    assert json.loads(site.operator("key", "status", "--json", check=True).stdout)["owner_key"] is None

    before = json.loads(site.backup(check=True).stdout)["id"]
    assert_clean_error(site.cronjob("key", "owner-init", env={"DRTOOL_NEW_PASSPHRASE": PASSPHRASE}), 5, "owner")
    upgraded = site.operator("key", "owner-init", env={"DRTOOL_NEW_PASSPHRASE": PASSPHRASE})
    assert upgraded.returncode == 0, upgraded.stderr
    print(f"\n{upgraded.stdout.strip()}")
    again = site.operator("key", "owner-init", env={"DRTOOL_NEW_PASSPHRASE": PASSPHRASE})
    assert_clean_error(again, 2, "already has owner key")

    forge_rotation(site, site.cronjob_key())
    ran = site.backup()
    assert ran.returncode == 0, ran.stderr
    assert any("not signed by the store's owner key" in w for w in warnings(ran.stderr)), ran.stderr
    assert generation_of(site, json.loads(ran.stdout)["id"]) == 0
    restored = site.cli.home / "restored"
    site.operator("restore", before, "-p", "files", "-t", f"path={restored}", check=True)
    assert [p.read_bytes() for p in restored.rglob("model.bin")] == [random.Random(25).randbytes(MIB)]

    new_keyfile = cli.home / "new-cronjob.key"
    new = {"DRTOOL_NEW_PASSPHRASE": NEW_PASSPHRASE}
    rotated = site.operator("key", "rotate", "--passphrase", "--keyfile", str(new_keyfile), env=new)
    assert rotated.returncode == 0, rotated.stderr
    after = json.loads(site.backup(env={"DRTOOL_KEYFILE": str(new_keyfile)}, check=True).stdout)["id"]
    shown = site.operator("show", after, "--json", env={"DRTOOL_PASSPHRASE": NEW_PASSPHRASE}, check=True)
    assert json.loads(shown.stdout)["key_generation"] == 1


def test_a_keyring_owner_planted_without_the_key_is_ignored(cli: Cli, tmp_path: Path) -> None:
    """A keyless writer puts a keyring/owner of its own into a store made before owner keys (self-signed,
    but not MACed under the store's key): opening ignores it with one warning and the store works as before;
    `owner-init` says what to remove."""
    site = Site(cli, tmp_path)
    shutil.rmtree(site.store)
    secret = slots.read_keyfile(site.keyfile.read_text(), "cronjob.key").secret
    repo = Repository.init(open_backend(str(site.store)), keyfile_secret=secret, pins=PinStore(None))
    repo.add_slot(slots.passphrase_slot(repo.key, PASSPHRASE))
    site.keyfile.write_text(slots.keyfile_text(secret, repo.key))
    attacker = Ed25519PrivateKey.generate()
    public = base64.b64encode(attacker.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    planted = {"version": 1, "store_id": repo.config.store_id, "generation": 0, "created": "2026-12-01T00:00:00Z",
               "key_check": repo.key.key_check, "owner": public, "config_sha256": "0" * 64}  # fmt: skip
    planted["owner_sig"] = base64.b64encode(attacker.sign(_canonical(planted))).decode()
    planted["mac"] = "0" * 64
    (site.store / "keyring" / "owner").write_text(json.dumps(planted))
    ran = site.backup()
    assert ran.returncode == 0, ran.stderr
    assert any("keyring/owner ignored" in w for w in warnings(ran.stderr)), ran.stderr
    kept = site.slots_kept()
    refused = site.operator("key", "owner-init", env={"DRTOOL_NEW_PASSPHRASE": PASSPHRASE})
    assert refused.returncode == 4 and "remove keyring/owner" in refused.stderr, refused.stderr
    assert site.slots_kept() == kept  # no slot left behind
