"""`drtool key rotate`: a new master key for everything written from now on.

Removing a key slot does not revoke a credential that was leaked: the master key stays the same, a copy
of the slot (an old object version in a versioned or locked bucket) still unwraps it, and what it unwraps
reads every later backup. Rotation makes a new key generation instead (docs/store-format.md, "Key records
and rotation"):

1. under the store's exclusive lock (no backup runs), a new master key and its first slots (a new
   passphrase and/or key file: the old credentials must not open it);
2. the rotation record: the new key's check, the old keys sealed under the new one (so its holders
   still read old backups), the manifests and index objects that exist now (all the old key may ever
   open again), and an HMAC under the old key that tells its holders it was retired;
3. every other slot is deleted: they wrap the old key. Where a slot cannot be deleted (no delete
   permission, or a bucket that keeps old versions) its credential still opens the old key, which reads
   what was written before the rotation and nothing after, and which drtool refuses to write with.

A rotation is the store owner's act: in a store with an owner key (drtool/crypto/owner.py) the record is
signed by it, and only a credential that holds it (the passphrase, recovery shares: never the CronJob's
key file) can rotate; the new passphrase slot holds it from then on. A record not signed by it is ignored
(drtool/repo/trust.py), so writing one by hand achieves nothing either.

New chunks get new ids (a new id key and gear table), so the first backup after a rotation deduplicates
against nothing written before it and stores everything again: docs/store-format.md gives the figure.
"""

from __future__ import annotations

import dataclasses

from drtool.crypto import slots
from drtool.crypto.master import MasterKey
from drtool.errors import StoreUnavailable, UsageError, WrongKey
from drtool.repo import keyring, layout, trust
from drtool.repo.lock import acquire
from drtool.repo.pins import Pin, PinStore
from drtool.repo.repository import Repository
from drtool.repo.writer import DEFAULT_LOCK_WAIT


@dataclasses.dataclass
class Rotation:
    repo: Repository  # the store opened with its new key
    generation: int
    added: list[slots.KeySlot]
    removed: list[str]
    kept: dict[str, str]  # slots that could not be deleted, and why


def rotate(
    repo: Repository,
    *,
    passphrase: str | None = None,
    keyfile_secret: bytes | None = None,
    pins: PinStore | None = None,
    lock_wait: float = DEFAULT_LOCK_WAIT,
) -> Rotation:
    """Replace ``repo``'s key with a new generation opened by ``passphrase`` and/or ``keyfile_secret``."""
    repo.require_current("rotate the key")
    if not (passphrase or keyfile_secret):
        raise UsageError("a rotated key needs a new passphrase or key file", "give --passphrase or --keyfile PATH")
    backend, old = repo.backend, repo.key
    config_bytes = Repository.config_bytes(backend)
    decision = trust.of_store(backend)
    records = decision.records
    _require_owner(repo, decision.owner is not None, passphrase)
    previous = next((r for r in records if keyring.authentic(r, old)), {})
    with acquire(repo, "exclusive", "key rotate", wait=lock_wait) as lock:
        new = MasterKey.generate(repo.config.store_id)
        added = []
        if passphrase:
            added.append(slots.passphrase_slot(new, passphrase, "passphrase", owner=repo.owner))
        if keyfile_secret:
            added.append(slots.keyfile_slot(new, keyfile_secret, "key file"))
        for slot in added:
            backend.put(layout.key_slot(slot.id), slot.to_bytes(), exclusive=True)
        indexes = [i for n in backend.list(layout.INDEX) if (i := layout.index_id_of(n))]
        record = keyring.rotation_record(new, old, repo.backup_ids(), indexes, previous, config_bytes, repo.owner)
        lock.check()
        keyring.write_record(backend, record)  # from here on the new key is the store's
    removed, kept = [], {}
    for slot in Repository.key_slots(backend):
        if slot.id in {s.id for s in added}:
            continue
        try:
            backend.delete(layout.key_slot(slot.id))
            removed.append(slot.id)
        except StoreUnavailable as exc:
            kept[slot.id] = exc.message
    decision = trust.of_store(backend)
    found = keyring.establish(new, decision.records, config_bytes)
    found.owner_key = decision.owner
    digest = keyring.config_digest(config_bytes)
    pin = Pin(repo.config.store_id, found.generation, new.key_check, digest, added[0].id, decision.owner)
    (pins or PinStore.default()).put(pin)
    rotated = Repository(backend, repo.config, new, added[0], trust=found, max_skew=repo.max_skew, owner=repo.owner)
    return Rotation(rotated, found.generation, added, removed, kept)


def _require_owner(repo: Repository, has_owner: bool, passphrase: str | None) -> None:
    """Only the store's owner rotates: its owner key signs the record, and a new passphrase slot keeps it."""
    by_keyfile = repo.unlocked_with is not None and repo.unlocked_with.kind == "keyfile"
    if (has_owner and repo.owner is None) or (not has_owner and by_keyfile):
        raise WrongKey(
            "rotating the key needs the store owner's credential: a passphrase or recovery shares whose slot holds "
            "the owner key; the credential given does not (a key file, which the backup CronJob holds, never does)",
            "run `drtool key rotate` with the owner's DRTOOL_PASSPHRASE or DRTOOL_RECOVERY_SHARES_FILE",
        )
    if has_owner and not passphrase:
        raise UsageError(
            "a rotation of a store with an owner key needs a new passphrase: its slot keeps the owner key",
            "add --passphrase (and DRTOOL_NEW_PASSPHRASE or DRTOOL_NEW_PASSPHRASE_FILE)",
        )
