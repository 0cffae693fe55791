"""The passphrase slot's Argon2id derivation, started ahead while the process imports (drtool/cli/entry.py).

Starting early must change nothing but when the work is done: the open takes the result ahead of it exactly
once, a wrong passphrase is still refused, a planted slot's settings are bounded before anything runs, and
nothing starts where it is not wanted (help, a command that opens no store, an S3 store, no credentials in the
environment, several passphrase slots).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from drtool.backends.local import LocalBackend
from drtool.cli.entry import derive_store_key_ahead
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials
from drtool.errors import WrongKey
from drtool.repo.pins import PinStore
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread of each Argon2id derivation from now on; no derivation pending from elsewhere."""
    names: list[str] = []
    real = slots._derive

    def derive(passphrase: str, salt: bytes, params: dict[str, Any]) -> bytes:
        names.append(threading.current_thread().name)
        return real(passphrase, salt, params)

    monkeypatch.setattr(slots, "_ahead", {})
    monkeypatch.setattr(slots, "_derive", derive)
    for name in ("DRTOOL_STORE", "DRTOOL_PASSPHRASE_FILE", "DRTOOL_KEYFILE", "DRTOOL_RECOVERY_SHARES_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DRTOOL_PASSPHRASE", PASSPHRASE)
    return names


def _open(repo: Repository, tmp_path: Path, passphrase: str = PASSPHRASE) -> Repository:
    return Repository.open(
        LocalBackend(repo.backend.url), Credentials(passphrase=passphrase), pins=PinStore(tmp_path / "pins")
    )


def test_the_open_takes_the_derivation_started_ahead(repo: Repository, tmp_path: Path, derived: list[str]) -> None:
    derive_store_key_ahead(["--store", repo.backend.url, "backup", "-p", "files"])
    assert len(slots._ahead) == 1
    opened = _open(repo, tmp_path)
    assert opened.key.key_check == repo.key.key_check
    assert derived == ["argon2id-ahead"]  # derived once, in the thread started ahead
    assert slots._ahead == {}


def test_a_wrong_passphrase_derived_ahead_is_still_refused(
    repo: Repository, tmp_path: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRTOOL_PASSPHRASE", "not the passphrase")
    derive_store_key_ahead([f"--store={repo.backend.url}", "restore"])
    with pytest.raises(WrongKey):
        _open(repo, tmp_path, "not the passphrase")
    assert derived == ["argon2id-ahead"]
    assert slots._ahead == {}


@pytest.mark.parametrize(
    "argv",
    [
        ["--store", "{store}", "backup", "--help"],
        ["--store", "{store}", "list"],
        ["backup", "-p", "files"],  # the store only in the config file
        ["--store", "s3://bucket/prefix", "backup"],
    ],
)
def test_nothing_starts_where_it_is_not_wanted(repo: Repository, derived: list[str], argv: list[str]) -> None:
    derive_store_key_ahead([word.format(store=repo.backend.url) for word in argv])
    assert slots._ahead == {} and derived == []


def test_nothing_starts_without_credentials_in_the_environment(
    repo: Repository, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRTOOL_PASSPHRASE")  # the command would prompt: that is not done ahead
    derive_store_key_ahead(["--store", repo.backend.url, "backup"])
    assert slots._ahead == {} and derived == []


def test_several_passphrase_slots_start_nothing(repo: Repository, derived: list[str]) -> None:
    repo.add_slot(slots.passphrase_slot(repo.key, "a second passphrase", "second"))
    derived.clear()
    derive_store_key_ahead(["--store", repo.backend.url, "backup"])
    assert slots._ahead == {} and derived == []


def test_a_planted_slots_settings_are_bounded_before_anything_runs(repo: Repository, derived: list[str]) -> None:
    (slot,) = repo.key_slots(repo.backend)
    for absurd in ({"memory_kib": 64 * 2**20}, {"iterations": 1000}, {"lanes": 64}):
        slots.derive_ahead(PASSPHRASE, dataclasses.replace(slot, kdf=slot.kdf | absurd))
    assert slots._ahead == {} and derived == []
