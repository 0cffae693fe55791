"""The `drtool` command as a user runs it: real processes, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from drtool.backends.local import LocalBackend
from drtool.crypto.credentials import Credentials
from drtool.repo import layout
from drtool.repo.repository import Repository
from tests.fixtures import stores
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.noise import noise


@pytest.fixture
def files_setup(cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    """A store and a config whose `files` source holds a PKI-like tree."""
    src = tmp_path / "pki"
    (src / "etcd").mkdir(parents=True)
    (src / "ca.key").write_bytes(b"-----BEGIN PRIVATE KEY-----\n" + noise(1200, seed=1) + b"\n")
    (src / "etcd" / "ca.crt").write_text("certificate\n" * 100)
    (src / "sa.pub").write_bytes(noise(3 * 1024 * 1024, seed=2))
    store = tmp_path / "store"
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"paths": [str(src)]}}}))
    cli("init", "--store", str(store), check=True)
    return src, store


def test_backup_list_show_restore_round_trip(cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path) -> None:
    src, _store = files_setup
    out = cli("backup", "--plugin", "files", "--json", check=True)
    backup = json.loads(out.stdout)
    assert backup["status"] == "complete"
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert [b["id"] for b in listed] == [backup["id"]]
    shown = json.loads(cli("show", backup["id"][:12], "--json", check=True).stdout)
    assert shown["artifacts"][0]["sensitive"] is True
    dest = tmp_path / "restored"
    restored = cli("restore", "latest", "-p", "files", "-t", f"path={dest}", "--json", check=True)
    result = json.loads(restored.stdout)
    assert result["verified"] and result["changed"]
    assert (dest / "0-pki" / "ca.key").read_bytes() == (src / "ca.key").read_bytes()
    assert (dest / "0-pki" / "sa.pub").read_bytes() == (src / "sa.pub").read_bytes()
    again = json.loads(cli("restore", "latest", "-p", "files", "-t", f"path={dest}", "--json", check=True).stdout)
    assert again["changed"] is False


def test_a_restore_without_verification_is_not_called_verified(
    cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """`--no-verify --json` once said "verified": true over an empty check list (an all() over nothing)."""
    cli("backup", "--plugin", "files", check=True)
    dest = tmp_path / "restored"
    out = cli("restore", "latest", "-p", "files", "-t", f"path={dest}", "--no-verify", "--json", check=True)
    result = json.loads(out.stdout)
    assert (result["verified"], result["verification"], result["checks"]) == (False, "skipped", [])
    verified = json.loads(cli("restore", "latest", "-p", "files", "-t", f"path={dest}", "--json", check=True).stdout)
    assert (verified["verified"], verified["verification"]) == (True, "passed") and verified["checks"]


def test_catalog_rebuild_on_a_machine_that_never_saw_the_store(
    cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    _, store = files_setup
    ids = {json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["id"] for _ in range(2)}
    fresh = Cli(tmp_path / "newhome")
    fresh.home.mkdir()
    rebuilt = fresh("--store", str(store), "catalog", "rebuild", check=True)
    assert "2 backup(s)" in rebuilt.stdout
    listed = json.loads(fresh("--store", str(store), "list", "--json", check=True).stdout)
    assert {b["id"] for b in listed} == ids


def test_wrong_passphrase(cli: Cli, files_setup: tuple[Path, Path]) -> None:
    assert_clean_error(cli("list", env={"DRTOOL_PASSPHRASE": "wrong passphrase"}), 5, "no key slot")


def test_unknown_backup_id(cli: Cli, files_setup: tuple[Path, Path]) -> None:
    assert_clean_error(cli("show", "20990101T000000Z-000000"), 6, "not found")
    assert_clean_error(cli("restore", "nonsense", "-p", "files", "-t", "path=/tmp/x"), 6)


def test_missing_store(cli: Cli, tmp_path: Path) -> None:
    assert_clean_error(cli("--store", str(tmp_path / "nothing"), "list"), 6, "no drtool store")
    assert_clean_error(cli("list"), 2, "no store configured")


def test_flipped_byte_in_chunk_detected_by_check_and_restore_writes_nothing(
    cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    _, store = files_setup
    backup_id = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["id"]
    repo = Repository.open(LocalBackend(store), Credentials(passphrase=PASSPHRASE))
    chunk = sorted(repo.chunk_ids())[0]
    stores.flip_byte(repo, chunk)
    assert cli("check").returncode == 0  # names only: every chunk is present
    checked = cli("check", "--read-data", "--json")
    assert checked.returncode == 4
    assert list(json.loads(checked.stdout)["damaged_chunks"]) == [chunk]
    dest = tmp_path / "restored"
    assert_clean_error(cli("restore", backup_id, "-p", "files", "-t", f"path={dest}"), 4, "failed authentication")
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".drtool-staging")]


def test_flipped_byte_in_manifest(cli: Cli, files_setup: tuple[Path, Path]) -> None:
    _, store = files_setup
    backup_id = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["id"]
    name = layout.manifest(backup_id)
    blob = bytearray((store / name).read_bytes())
    blob[40] ^= 0x01
    (store / name).write_bytes(bytes(blob))
    assert_clean_error(cli("show", backup_id), 4, f"manifest {backup_id}")
    assert cli("check").returncode == 4


def test_missing_chunk(cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path) -> None:
    _, store = files_setup
    backup_id = json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["id"]
    repo = Repository.open(LocalBackend(store), Credentials(passphrase=PASSPHRASE))
    victim = sorted(repo.chunk_ids())[-1]
    holder = stores.where(repo, victim)[0]
    in_pack = {c for c in repo.chunk_ids() if stores.where(repo, c)[0] == holder}
    stores.remove(repo, victim)
    report = json.loads(cli("check", "--json").stdout)
    assert set(report["missing_chunks"]) == in_pack  # format 2: every chunk of the deleted pack
    dest = tmp_path / "restored"
    assert_clean_error(cli("restore", backup_id, "-p", "files", "-t", f"path={dest}"), 4, "missing")
    assert not dest.exists()


def test_failing_source_gives_partial_or_nothing(cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path) -> None:
    src, _ = files_setup
    os.rename(src, tmp_path / "moved")
    assert_clean_error(cli("backup", "-p", "files"), 7, "nothing was written", "not found")
    assert json.loads(cli("list", "--json", check=True).stdout) == []


def test_key_commands(cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path) -> None:
    keyfile = tmp_path / "drtool.key"
    cli("key", "add", "--keyfile", str(keyfile), check=True)
    assert oct(keyfile.stat().st_mode & 0o777) == "0o600"
    by_keyfile = {"DRTOOL_PASSPHRASE": None, "DRTOOL_KEYFILE": str(keyfile)}
    cli("list", env=by_keyfile, check=True)  # type: ignore[arg-type]
    shares_file = tmp_path / "shares"
    cli("key", "recovery-shares", "-k", "2", "-n", "3", "--out", str(shares_file), check=True)
    shares = shares_file.read_text().splitlines()
    one = tmp_path / "one"
    one.write_text(shares[2] + "\n")
    two = tmp_path / "two"
    two.write_text(shares[0] + "\n" + shares[2] + "\n")
    by_shares = {"DRTOOL_PASSPHRASE": None, "DRTOOL_RECOVERY_SHARES_FILE": str(two)}
    cli("list", env=by_shares, check=True)  # type: ignore[arg-type]
    assert_clean_error(
        cli("list", env={"DRTOOL_PASSPHRASE": None, "DRTOOL_RECOVERY_SHARES_FILE": str(one)}),
        5,  # type: ignore[dict-item]
        "needs 2",
    )
    slots = json.loads(cli("key", "list", "--json", check=True).stdout)
    assert sorted(s["kind"] for s in slots) == ["keyfile", "passphrase", "recovery"]
    recovery = next(s for s in slots if s["kind"] == "recovery")
    cli("key", "remove", recovery["id"], check=True)
    assert_clean_error(cli("list", env=by_shares), 5, "removed key slot")  # type: ignore[arg-type]


def test_passphrase_never_in_argv_or_output(cli: Cli, files_setup: tuple[Path, Path]) -> None:
    out = cli("backup", "-p", "files", check=True)
    secret = cli.env["DRTOOL_PASSPHRASE"]
    assert secret not in out.stdout + out.stderr


def test_no_plaintext_secret_anywhere_after_backup(cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path) -> None:
    """A distinctive secret in the source appears in no store object, the catalog, or any output."""
    src, store = files_setup
    marker = b"DRTOOL-SEEDED-SECRET-7f3a9c"
    (src / "token").write_bytes(marker * 50)
    out = cli("backup", "-p", "files", "--json", check=True)
    shown = cli("show", "latest", "--json", check=True)
    listed = cli("list", "--json", check=True)
    for blob in (out.stdout, out.stderr, shown.stdout, listed.stdout):
        assert marker.decode() not in blob
    everything = [p for p in store.rglob("*") if p.is_file()] + [cli.home / "catalog.db"]
    assert len(everything) > 3
    for path in everything:
        data = path.read_bytes()
        assert marker not in data and cli.env["DRTOOL_PASSPHRASE"].encode() not in data, path


def test_rehearse_without_a_target_provider_says_so_in_one_line(
    cli: Cli, files_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """`rehearse` is the product's: in an install without the lab (the container image's; here the lab's package
    made unimportable) it is still a command, and a rehearsal into the default `lab` target says in one line that
    no provider is installed. A target no provider answers says the same, naming the installed ones."""
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: pki-only\nsteps:\n  - id: pki\n    uses: files\n")
    no_lab = tmp_path / "no-lab"
    no_lab.mkdir()
    (no_lab / "sitecustomize.py").write_text("import sys\nsys.modules['drtool_lab'] = None\n")
    without = {"PYTHONPATH": str(no_lab)}
    assert "No such command" in cli("demo", "--help", env=without).stderr  # the lab's commands are gone
    proc = cli("rehearse", "--plan", str(plan), env=without)
    assert_clean_error(proc, 2, "no rehearsal target provider 'lab' is installed (the lab is not)", "kubeconfig")
    assert not (tmp_path / "home" / "drtool-reports").exists()
    named = cli("rehearse", "--plan", str(plan), "--target", "nosuch")
    assert_clean_error(named, 2, "no rehearsal target provider 'nosuch' is installed", "or one of: lab")
