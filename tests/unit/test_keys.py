"""Key slots: every kind opens the store, wrong credentials fail cleanly, removed slots stop working."""

from __future__ import annotations

import pytest

from drtool.crypto import slots
from drtool.crypto.credentials import Credentials
from drtool.errors import UsageError, WrongKey
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE


def test_passphrase_opens_and_wrong_one_fails(repo: Repository) -> None:
    assert Repository.open(repo.backend, Credentials(passphrase=PASSPHRASE)).key == repo.key
    with pytest.raises(WrongKey, match="no key slot"):
        Repository.open(repo.backend, Credentials(passphrase="not the passphrase"))


def test_keyfile_slot(repo: Repository) -> None:
    text, secret = slots.new_keyfile_text()
    repo.add_slot(slots.keyfile_slot(repo.key, secret))
    parsed = slots.parse_keyfile(text, "kf")
    assert Repository.open(repo.backend, Credentials(keyfile_secret=parsed)).key == repo.key
    _, other = slots.new_keyfile_text()
    with pytest.raises(WrongKey):
        Repository.open(repo.backend, Credentials(keyfile_secret=other))


def test_recovery_shares_threshold_and_revocation(repo: Repository) -> None:
    slot, shares = slots.recovery_slot(repo.key, 3, 5)
    repo.add_slot(slot)
    opened = Repository.open(repo.backend, Credentials(shares=(shares[4], shares[0], shares[2])))
    assert opened.key == repo.key
    with pytest.raises(WrongKey, match="needs 3"):
        Repository.open(repo.backend, Credentials(shares=tuple(shares[:2])))
    repo.remove_slot(slot.id)
    with pytest.raises(WrongKey, match="another store or to a removed key slot"):
        Repository.open(repo.backend, Credentials(shares=tuple(shares[:3])))


def test_shares_from_another_store_are_refused(repo: Repository, tmp_path) -> None:
    from drtool.backends.local import LocalBackend

    other = Repository.init(LocalBackend(tmp_path / "other"), passphrase=PASSPHRASE)
    slot, shares = slots.recovery_slot(other.key, 2, 3)
    other.add_slot(slot)
    with pytest.raises(WrongKey, match="another store"):
        Repository.open(repo.backend, Credentials(shares=tuple(shares)))


def test_share_typo_is_caught_by_checksum() -> None:
    line = slots.format_share("abcd", "ef01", 2, 1, b"\x01" * 32)
    broken = (
        line.replace("AE", "AF", 1) if "AE" in line else line[:-12] + ("A" if line[-12] != "A" else "B") + line[-11:]
    )
    with pytest.raises(UsageError, match=r"typo|malformed"):
        slots.parse_share(broken)
    assert slots.parse_share(" ".join([line[:30], line[30:]])).y == b"\x01" * 32  # spaces from printing are fine


def test_last_slot_cannot_be_removed(repo: Repository) -> None:
    only = Repository.key_slots(repo.backend)
    assert len(only) == 1
    with pytest.raises(UsageError, match="last key slot"):
        repo.remove_slot(only[0].id)


def test_slot_is_bound_to_its_store(repo: Repository, tmp_path) -> None:
    """A slot copied into another store does not open it: the store id is authenticated data."""
    from drtool.backends.local import LocalBackend

    other = Repository.init(LocalBackend(tmp_path / "other"), passphrase="another passphrase")
    for name in repo.backend.list("keys/"):
        other.backend.put(name, repo.backend.get(name))
    with pytest.raises(WrongKey):
        Repository.open(other.backend, Credentials(passphrase=PASSPHRASE))


def test_no_secret_in_slot_or_config(repo: Repository) -> None:
    for name in repo.backend.list(""):
        blob = repo.backend.get(name)
        assert repo.key._secret not in blob
        assert PASSPHRASE.encode() not in blob
