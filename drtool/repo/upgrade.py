"""`drtool key owner-init`: an owner key for a store made before owner keys (docs/store-format.md, "Owner key").

Such a store's ``keyring/0000`` names no owner key, and is written once, so the owner key goes into its own
record, ``keyring/owner`` (drtool/repo/keyring.py ``upgrade_record``): MACed under the current key, signed
by the new owner key, written once. From its generation on, a key record counts only if the owner key
signed it (drtool/repo/trust.py). The owner key is sealed into a new passphrase slot; the slot that opened
the store is removed when it is a passphrase slot, so that the passphrase opens the owner key from now on.
Whoever writes ``keyring/owner`` first is trusted (docs/threat-model.md): run this before anyone else can.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

from drtool.crypto import slots
from drtool.crypto.owner import OwnerKey, fingerprint
from drtool.errors import IntegrityError, ObjectExists, StoreUnavailable, UsageError, WrongKey
from drtool.repo import keyring, layout
from drtool.repo.repository import Repository


@dataclasses.dataclass
class Upgraded:
    fingerprint: str
    slot: slots.KeySlot  # the new passphrase slot that holds the owner key
    removed: str | None  # the slot that opened the store, when it could be removed


def give_owner_key(repo: Repository, passphrase: str) -> Upgraded:
    """Write ``keyring/owner`` for a new owner key and seal it into a passphrase slot for ``passphrase``."""
    repo.require_current("give the store an owner key")
    opened_with = repo.unlocked_with
    if opened_with is None or opened_with.kind not in slots.OWNER_KINDS:
        raise WrongKey(
            "an owner key is given by the store's owner: open the store with its passphrase or recovery shares, "
            "not a key file (the backup CronJob holds one)",
            "set DRTOOL_PASSPHRASE or DRTOOL_RECOVERY_SHARES_FILE, not DRTOOL_KEYFILE",
        )
    backend = repo.backend
    if repo.trust.owner_key:
        raise UsageError(
            f"store {repo.config.store_id} already has owner key {fingerprint(repo.trust.owner_key)}",
            "if you did not give it, someone holding the master key did: see docs/threat-model.md",
        )
    owner = OwnerKey.generate()
    slot = slots.passphrase_slot(repo.key, passphrase, "passphrase (owner)", owner=owner)
    record = keyring.upgrade_record(repo.key, repo.trust.generation, Repository.config_bytes(backend), owner)
    repo.add_slot(slot)
    try:
        backend.put(keyring.UPGRADE, json.dumps(record, indent=1).encode(), exclusive=True)
    except ObjectExists:
        with contextlib.suppress(StoreUnavailable):  # its owner key is not the store's: the slot must not stay
            backend.delete(layout.key_slot(slot.id))
        raise IntegrityError(
            f"{keyring.UPGRADE} exists, and it is not one this store's key wrote (opening ignored it: planted?)",
            f"remove {keyring.UPGRADE} from the store, then run `drtool key owner-init` again",
        ) from None
    removed: str | None = None
    if opened_with.kind == "passphrase":  # recovery shares stay with their keepers
        try:
            backend.delete(layout.key_slot(opened_with.id))
            removed = opened_with.id
        except StoreUnavailable:
            pass
    return Upgraded(fingerprint(owner.public), slot, removed)
