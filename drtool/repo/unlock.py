"""Opening a store: from credentials to the store's own master key, never another, in one pass.

1. Slots are read and checked before any KDF runs; a malformed slot, an unknown version or settings out of
   bounds is named in a warning and skipped (drtool/crypto/slots.py).
2. The key records are read and the trust decision is made before any key is used (drtool/repo/trust.py):
   in a store with an owner key, only the owner-signed chain counts, and it says which key checks are the
   store's and which generation is current. Records outside it are named and ignored. In a store upgraded
   by ``drtool key owner-init`` the owner key comes from ``keyring/owner``, which must authenticate under
   the key of the generation it names (checked once a key opened; if not, it is ignored and the store is
   judged as one without an owner key).
3. Every slot the credentials open yields a key (drtool/crypto/credentials.py). A key is the store's only if
   the decision names its key check and its records authenticate under it (drtool/repo/keyring.py
   ``establish``). Else the slot was planted: named, skipped. A retired key is used only when the
   credentials open no current one, and then with a loud warning.
4. What this machine pinned (drtool/repo/pins.py), what the credential itself names (a version-2 key file
   or recovery share) and what the deployment expects (``Credentials.expect``: a CronJob keeps no pins)
   must agree with the key chosen. Without any of them, on a new machine, the key must open the store's
   oldest backups too, which a planted key cannot.
5. An owner-class credential (passphrase, recovery shares) also opens the owner key; it must be the one the
   store records, or the first key record was replaced.
6. A store without key records (made before them) gets its first record from the first key holder that
   opens it with this drtool, if every slot the credentials open holds the same key and that key opens
   the oldest backups (docs/threat-model.md says what this cannot rule out).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from drtool.backends.backend import Backend
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials, Expected, Opened
from drtool.crypto.master import MANIFEST, MasterKey
from drtool.crypto.owner import OwnerKey, fingerprint
from drtool.errors import IntegrityError, StoreUnavailable, WrongKey
from drtool.repo import keyring, layout, trust
from drtool.repo.pins import Pin, PinStore

OLDEST_CHECKED = 3  # the oldest manifests a key must open when nothing else vouches for it (any one will do)


@dataclasses.dataclass
class Unlocked:
    key: MasterKey
    slot: slots.KeySlot
    trust: keyring.Trust
    owner: OwnerKey | None = None  # the store's owner key, when the credentials hold it
    decision: trust.TrustDecision | None = None


def unlock(backend: Backend, store_id: str, config_bytes: bytes, credentials: Credentials, pins: PinStore) -> Unlocked:
    """The store's key, as the slot ``credentials`` open that passes every check above."""
    warnings: list[str] = []
    usable = _usable_slots(backend, warnings)
    records, problems = keyring.read_records(backend)
    upgrade, upgrade_problems = keyring.read_upgrade(backend)
    warnings += [f"key record {p}" for p in problems + upgrade_problems]
    decision = trust.decide(records, upgrade)
    pin = pins.get(store_id)
    _check_config(pin, store_id, config_bytes)
    if not any(r["generation"] == 0 for r in records):
        candidates = list(credentials.candidates(store_id, usable, first=pin.slot if pin else None))
        opened = _adopt(backend, store_id, config_bytes, credentials, usable, candidates, pin, warnings)
    else:
        choose = functools.partial(_choose, backend, store_id, config_bytes, credentials, usable, pin=pin)
        opened, decision = _open_checking_upgrade(choose, records, decision, warnings)
    opened.decision = decision
    opened.trust.owner_key = decision.owner
    warnings += decision.ignored
    _check_owner(pin, store_id, decision)
    _check_expected(opened, credentials.expect, store_id)
    if opened.slot.authentic(opened.key) is False:
        warnings.append(
            f"key slot {opened.slot.id} opened the store, but its label or settings were changed after it was "
            "written (they do not authenticate)"
        )
    warnings += _notices(opened, pin, store_id)
    opened.trust.warnings[:0] = warnings
    if pin is None or opened.trust.generation >= pin.generation:
        digest = keyring.config_digest(config_bytes)
        seen = Pin(store_id, opened.trust.generation, opened.key.key_check, digest, opened.slot.id, decision.owner)
        if seen != pin:  # an unchanged pin is not written again (a write is a temp file, fsync and rename)
            pins.put(seen)
    return opened


def _open_checking_upgrade(
    choose: Callable[..., Unlocked], records: list[keyring.Record], decision: trust.TrustDecision, warnings: list[str]
) -> tuple[Unlocked, trust.TrustDecision]:
    """Open with ``decision``; when it took its owner key from ``keyring/owner``, that record must authenticate
    under the key of the generation it names. One that does not was written without that key (planted): it
    is ignored and the store is judged without it, unless the key the credentials open that way shows the
    record genuine after all (then ignoring it would let unsigned rotations back in: the first outcome stands)."""
    upgrade = decision.upgrade
    if upgrade is None:
        return choose(decision=decision, warnings=warnings), decision
    try:
        opened: Unlocked | None = choose(decision=decision, warnings=warnings)
    except (WrongKey, IntegrityError) as exc:
        opened, failure = None, exc
    if opened is not None and _upgrade_authentic(opened, upgrade):
        return opened, decision
    without = trust.decide(records)
    fallback = choose(decision=without, warnings=warnings)
    if _upgrade_authentic(fallback, upgrade):
        if opened is None:
            raise failure
        return opened, decision
    warnings.append(f"{keyring.UPGRADE} ignored: it does not authenticate under the store's key (planted?)")
    return fallback, without


def _check_config(pin: Pin | None, store_id: str, config_bytes: bytes) -> None:
    """The config this machine pinned must be the store's still."""
    if pin is not None and pin.config_sha256 != keyring.config_digest(config_bytes):
        raise IntegrityError(
            f"the config of store {store_id} changed since this machine last opened it",
            "restore the original drtool-store.json (a versioned bucket keeps it); see docs/threat-model.md",
        )


def _check_owner(pin: Pin | None, store_id: str, decision: trust.TrustDecision) -> None:
    """The owner key this machine pinned must be the one the store's first key record names still (checked
    once a key was found to be the store's: a first record of a foreign key is refused as such before)."""
    if pin is not None and pin.owner and pin.owner != decision.owner:
        now = f"owner key {fingerprint(decision.owner)}" if decision.owner else "no owner key"
        raise IntegrityError(
            f"store {store_id} had owner key {fingerprint(pin.owner)} when this machine last opened it, and its "
            f"first key record now names {now}: keyring/0000 was replaced by someone holding the master key",
            "restore the original keyring/0000 (a versioned bucket keeps it); see docs/threat-model.md",
        )


def _check_expected(opened: Unlocked, expect: Expected | None, store_id: str) -> None:
    """A deployment that names its key (a CronJob) opens the store with that generation or not at all."""
    if expect is None:
        return
    got = (opened.key.key_check, opened.trust.generation)
    if got != (expect.key_check, expect.generation):
        raise IntegrityError(
            f"store {store_id}: the key opened is generation {got[1]} (key check {got[0]}), not the generation "
            f"{expect.generation} (key check {expect.key_check}) this deployment expects; refusing to use it",
            "if the store's owner rotated the key, update DRTOOL_EXPECT_KEY_CHECK/_GENERATION and the key file; "
            "else see docs/threat-model.md (CronJob identity)",
        )


def _notices(opened: Unlocked, pin: Pin | None, store_id: str) -> list[str]:
    """What the user must hear loudly: a retired key, and a store that moved to another generation."""
    notices = []
    if opened.trust.retired_by:
        notices.append(
            f"THIS KEY WAS RETIRED: the key records of store {store_id} retire it ({opened.trust.retired_by}); the "
            f"credential you gave opens generation {opened.trust.generation}, which reads only backups written "
            "before then and writes nothing. Ask the store's owner for a credential of the current key."
        )
    if pin is not None and opened.trust.generation > pin.generation:
        signed = "signed by the owner key" if opened.decision and opened.decision.owner else "no owner key signs it"
        notices.append(
            f"store {store_id} moved from key generation {pin.generation} (pinned here) to "
            f"{opened.trust.generation} ({signed})"
        )
    return notices


def slot_listing(backend: Backend) -> tuple[list[slots.KeySlot], dict[str, str]]:
    """Every slot under ``keys/``: those that parse, and the others by id with the reason they are ignored."""
    found, rejected = [], {}
    for name in sorted(backend.list(layout.KEYS)):
        try:
            found.append(slots.KeySlot.from_bytes(backend.get(name), name))
        except slots.SlotRejected as exc:
            rejected[name.rsplit("/", 1)[-1]] = str(exc)
    return found, rejected


def derive_ahead(backend: Backend, passphrase: str) -> None:
    """Start deriving the wrapping key of the store's passphrase slot now (``slots.derive_ahead``), when it has
    exactly one: the process opens the store later, once its imports are done, and ``unlock`` then takes the
    result. With several passphrase slots nothing starts (which one opens is decided in ``unlock``; deriving
    all of them would cost what it saves)."""
    found, _ = slot_listing(backend)
    passphrase_slots = [s for s in found if s.kind == "passphrase"]
    if len(passphrase_slots) == 1:
        slots.derive_ahead(passphrase, passphrase_slots[0])


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
    *,
    decision: trust.TrustDecision,
    pin: Pin | None,
    warnings: list[str],
) -> Unlocked:
    """The first slot the credentials open whose key is the store's current one, else the first whose key is
    a retired one."""
    ignored, retired = [], None
    for opened in credentials.candidates(store_id, usable, first=pin.slot if pin else None):
        try:
            chosen = _judge(backend, config_bytes, credentials, opened, decision, pin)
        except keyring.ForeignKey as exc:
            warnings.append(f"key slot {opened.slot.id} ignored: {exc}")
            ignored.append(opened.slot.id)
            continue
        if not chosen.trust.retired_by:
            return chosen
        retired = retired or chosen
    if retired is not None:
        return retired
    raise credentials.no_slot_opens(store_id, usable, ignored)


def _judge(
    backend: Backend,
    config_bytes: bytes,
    credentials: Credentials,
    opened: Opened,
    decision: trust.TrustDecision,
    pin: Pin | None,
) -> Unlocked:
    """``opened`` as the store's key, or ForeignKey: the decision, the records, the anchors all agree."""
    check = opened.key.key_check
    if decision.chain is not None and decision.generation_of(check) is None:
        raise keyring.ForeignKey("the key it opens is not named by any key record the store's owner key signed")
    if credentials.expect is not None and check != credentials.expect.key_check:
        raise keyring.ForeignKey(f"the key it opens ({check}) is not the key this deployment expects")
    found = keyring.establish(opened.key, decision.records, config_bytes)
    _check_anchors(opened, found, pin)
    if pin is None and opened.vouched is None and credentials.expect is None:
        _check_opens_oldest(backend, opened)
    return Unlocked(opened.key, opened.slot, found, _owner(opened, decision))


def _upgrade_authentic(opened: Unlocked, upgrade: keyring.Record) -> bool:
    """Whether ``keyring/owner`` authenticates under the key of the generation it names (this key or one it
    retired; a key older than that generation cannot tell, and does not take it)."""
    keys = {opened.trust.generation: opened.key, **{r.generation: r.key for r in opened.key.retired}}
    key = keys.get(upgrade["generation"])
    return key is not None and keyring.upgrade_authentic(upgrade, key)


def _owner(opened: Opened, decision: trust.TrustDecision) -> OwnerKey | None:
    """The owner key ``opened``'s slot holds, checked against the one the store records."""
    if opened.owner is None:
        return None
    if opened.owner.public == decision.owner:
        return opened.owner
    now = f"owner key {fingerprint(decision.owner)}" if decision.owner else "no owner key"
    raise IntegrityError(
        f"key slot {opened.slot.id} holds the store's owner key {fingerprint(opened.owner.public)}, but the first "
        f"key record names {now}: keyring/0000 was replaced by someone holding the master key",
        "restore the original keyring/0000 (a versioned bucket keeps it); see docs/threat-model.md",
    )


def _check_anchors(opened: Opened, found: keyring.Trust, pin: Pin | None) -> None:
    """The pinned key and the key the credential names must be in the opened key's chain."""
    if opened.vouched is not None and not found.vouches_for(opened.vouched):
        raise keyring.ForeignKey("the key file or recovery shares were made for another key")
    if pin is None or found.vouches_for(pin.key_check):
        return
    if pin.generation <= found.generation:
        raise keyring.ForeignKey(f"it is not the key this machine pinned for store {pin.store_id}")
    if found.retired_by is None:
        raise IntegrityError(
            f"this machine has seen key generation {pin.generation} of store {pin.store_id}, but the key opened "
            f"is generation {found.generation} and no key record retires it (were key records removed?)",
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
