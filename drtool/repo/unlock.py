"""Opening a store: from credentials to the store's own master key, never another.

1. Slots are read and checked before any KDF runs; a malformed slot, an unknown version or settings out of
   bounds is named in a warning and skipped (drtool/crypto/slots.py).
2. Every slot the credentials open yields a key (drtool/crypto/credentials.py). A key is the store's only
   if the key records say so (drtool/repo/keyring.py): its generation's record authenticates under it and
   its chain leads back to the store's first key and config. Else the slot was planted: named, skipped.
3. What this machine pinned (drtool/repo/pins.py) and what the credential itself names (a version-2 key
   file or recovery share) must be in that key's chain. Without either, on a new machine, the key must
   open the store's oldest backups too, which a planted key cannot.
4. A store without key records (made before them) gets its first record from the first key holder that
   opens it with this drtool, if every slot the credentials open holds the same key and that key opens
   the oldest backups (docs/threat-model.md says what this cannot rule out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from drtool.backends.backend import Backend
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials, Opened
from drtool.crypto.master import MANIFEST, MasterKey
from drtool.errors import IntegrityError, StoreUnavailable
from drtool.repo import keyring, layout
from drtool.repo.pins import Pin, PinStore

OLDEST_CHECKED = 3  # the oldest manifests a key must open when nothing else vouches for it (any one will do)


@dataclasses.dataclass
class Unlocked:
    key: MasterKey
    slot: slots.KeySlot
    trust: keyring.Trust


def unlock(backend: Backend, store_id: str, config_bytes: bytes, credentials: Credentials, pins: PinStore) -> Unlocked:
    """The store's key, as the first slot ``credentials`` open that passes every check above."""
    warnings: list[str] = []
    usable = _usable_slots(backend, warnings)
    records, problems = keyring.read_records(backend)
    warnings += [f"key record {p}" for p in problems]
    pin = pins.get(store_id)
    if pin is not None and pin.config_sha256 != keyring.config_digest(config_bytes):
        raise IntegrityError(
            f"the config of store {store_id} changed since this machine last opened it",
            "restore the original drtool-store.json (a versioned bucket keeps it); see docs/threat-model.md",
        )
    candidates = credentials.candidates(store_id, usable, first=pin.slot if pin else None)
    if not any(r["generation"] == 0 for r in records):
        opened = _adopt(backend, store_id, config_bytes, credentials, usable, list(candidates), pin, warnings)
    else:
        opened = _choose(backend, store_id, config_bytes, credentials, usable, candidates, records, pin, warnings)
    if opened.slot.authentic(opened.key) is False:
        warnings.append(
            f"key slot {opened.slot.id} opened the store, but its label or settings were changed after it was "
            "written (they do not authenticate)"
        )
    opened.trust.warnings[:0] = warnings
    if pin is None or opened.trust.generation >= pin.generation:
        digest = keyring.config_digest(config_bytes)
        pins.put(Pin(store_id, opened.trust.generation, opened.key.key_check, digest, opened.slot.id))
    return opened


def slot_listing(backend: Backend) -> tuple[list[slots.KeySlot], dict[str, str]]:
    """Every slot under ``keys/``: those that parse, and the others by id with the reason they are ignored."""
    found, rejected = [], {}
    for name in sorted(backend.list(layout.KEYS)):
        try:
            found.append(slots.KeySlot.from_bytes(backend.get(name), name))
        except slots.SlotRejected as exc:
            rejected[name.rsplit("/", 1)[-1]] = str(exc)
    return found, rejected


def _usable_slots(backend: Backend, warnings: list[str]) -> list[slots.KeySlot]:
    found, rejected = slot_listing(backend)
    warnings += [f"key slot {slot_id} ignored: {why}" for slot_id, why in rejected.items()]
    usable = []
    for slot in found:
        problem = slots.check_slot(slot)
        if problem:
            warnings.append(f"key slot {slot.id} ignored: {problem}")
        else:
            usable.append(slot)
    return usable


def _choose(
    backend: Backend,
    store_id: str,
    config_bytes: bytes,
    credentials: Credentials,
    usable: list[slots.KeySlot],
    candidates: Iterator[Opened],
    records: list[keyring.Record],
    pin: Pin | None,
    warnings: list[str],
) -> Unlocked:
    ignored = []
    for opened in candidates:
        try:
            trust = keyring.establish(opened.key, records, config_bytes)
            _check_anchors(opened, trust, pin)
            if pin is None and opened.vouched is None:
                _check_opens_oldest(backend, opened)
        except keyring.ForeignKey as exc:
            warnings.append(f"key slot {opened.slot.id} ignored: {exc}")
            ignored.append(opened.slot.id)
            continue
        return Unlocked(opened.key, opened.slot, trust)
    raise credentials.no_slot_opens(store_id, usable, ignored)


def _check_anchors(opened: Opened, trust: keyring.Trust, pin: Pin | None) -> None:
    """The pinned key and the key the credential names must be in the opened key's chain."""
    if opened.vouched is not None and not trust.vouches_for(opened.vouched):
        raise keyring.ForeignKey("the key file or recovery shares were made for another key")
    if pin is None or trust.vouches_for(pin.key_check):
        return
    if pin.generation <= trust.generation:
        raise keyring.ForeignKey(f"it is not the key this machine pinned for store {pin.store_id}")
    if trust.retired_by is None:
        raise IntegrityError(
            f"this machine has seen key generation {pin.generation} of store {pin.store_id}, but the key opened "
            f"is generation {trust.generation} and no key record retires it (were key records removed?)",
            "open the store with a credential of the current key; see docs/threat-model.md",
        )


def _check_opens_oldest(backend: Backend, opened: Opened) -> None:
    """On a machine that has never seen the store, a key must open one of its oldest backups: a planted
    key cannot (manifests a planted key could open were written after the genuine oldest ones)."""
    oldest = sorted(backend.list_timed(layout.MANIFESTS), key=lambda named: named[1])[:OLDEST_CHECKED]
    for name, _ in oldest:
        backup_id = layout.backup_id_of(name)
        if backup_id is None:
            continue
        try:
            opened.key.unseal(MANIFEST, backup_id, backend.get(name))
            return
        except IntegrityError:
            continue
    if oldest:
        raise keyring.ForeignKey("the key it opens does not open the store's oldest backups")


def _adopt(
    backend: Backend,
    store_id: str,
    config_bytes: bytes,
    credentials: Credentials,
    usable: list[slots.KeySlot],
    opened: list[Opened],
    pin: Pin | None,
    warnings: list[str],
) -> Unlocked:
    """A store without key records: bind the key every slot of these credentials agrees on (trust on first
    use), record it as generation 0 with the config's hash and the 32-bit gear seed it has always used."""
    keys = {o.key.key_check: o for o in opened if o.vouched is None or o.key.key_check.startswith(o.vouched)}
    if pin is not None:
        keys = {check: o for check, o in keys.items() if check == pin.key_check}
    if not keys:
        raise credentials.no_slot_opens(store_id, usable, [o.slot.id for o in opened])
    if len(keys) > 1:
        ids = ", ".join(o.slot.id for o in keys.values())
        raise IntegrityError(
            f"key slots {ids} open different keys with these credentials, and the store records none: all but "
            "one were planted",
            "remove the slots that are not yours (`drtool key list`), then open the store again",
        )
    (chosen,) = keys.values()
    if pin is None:
        try:
            _check_opens_oldest(backend, chosen)
        except keyring.ForeignKey as exc:
            raise IntegrityError(f"key slot {chosen.slot.id}: {exc}", "see docs/threat-model.md") from None
    try:
        root = keyring.write_root(backend, chosen.key, config_bytes, keyring.GEAR_SEED32)
    except StoreUnavailable as exc:  # read-only credentials: the pin alone remembers it
        warnings.append(f"the store's key check could not be recorded in the store ({exc.message}); pinned here only")
        root = keyring.root_record(chosen.key, config_bytes, keyring.GEAR_SEED32)
    try:
        trust = keyring.establish(chosen.key, [root], config_bytes)
    except keyring.ForeignKey as exc:
        raise IntegrityError(f"another key's record was written into the store first ({exc})") from None
    return Unlocked(chosen.key, chosen.slot, trust)
