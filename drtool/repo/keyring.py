"""The store's key records: which master key is the store's own, across rotations (docs/store-format.md,
"Key records and rotation").

A key slot only says "this credential unwraps *a* key"; anyone who can write ``keys/`` can plant one. What
says which key is the store's is a chain of *key records* under ``keyring/``, plaintext JSON, each
authenticated with an HMAC under the key it describes:

- ``keyring/0000`` (generation 0), written by ``init`` before the config: the key check of the first key,
  the SHA-256 of the config (so a writer cannot shrink chunk bounds), the gear table the chunker uses, and
  the public half of the store owner's signing key (``owner``, drtool/crypto/owner.py).
  Stores made before key records get theirs when a key holder first opens them (``root_record``).
- ``keyring/<generation>-<key check>``, written by ``drtool key rotate``: the new key's check, the retired
  keys sealed under the new key (the *ring*), the manifests and index objects the retired key had sealed
  by then (all it may still open), a second HMAC under the retired key (``retires``), so a holder of
  the old key learns it was retired, and the owner key's signature (``owner_sig``) over all of it with the
  previous record's hash and the config's: in a store with an owner key, only those count
  (drtool/repo/trust.py), so a holder of the master key alone (the CronJob) cannot rotate.

- ``keyring/owner``, written once by ``drtool key owner-init`` in a store whose ``keyring/0000`` names no
  owner key (made before owner keys): the owner key from its current generation on, MACed under that
  generation's key and signed by the owner key (``upgrade_record``). Who writes it first is trusted on first
  use (docs/threat-model.md).

``establish`` checks a key against these records and says which generation it is, what it retires, and
whether a newer generation retired it.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from drtool.backends.backend import Backend
from drtool.crypto import owner as owner_key
from drtool.crypto.master import KEYRING, MasterKey, RetiredKey
from drtool.crypto.owner import OwnerKey
from drtool.errors import IntegrityError, NotFound, ObjectExists

RECORDS = "keyring/"
ROOT = f"{RECORDS}0000"
RECORD_VERSION = 1
GEAR_SEED32 = "seed32-v1"  # stores made before key records: FastCDC's table XOR a 32-bit seed
GEAR_KEYED = "permuted-v1"  # a keyed permutation of the table and a 63-bit seed (MasterKey.gear)
_RECORD_NAME = re.compile(r"^keyring/(\d{4})(?:-[0-9a-f]{32})?$")
_RECORD_MAC = "keyring-record"
_RETIRE_MAC = "keyring-retires"
_UPGRADE_MAC = "keyring-owner"
UPGRADE = f"{RECORDS}owner"

Record = dict[str, Any]


class ForeignKey(Exception):
    """A key a slot opened is not this store's (a planted slot), and why."""


def record_name(generation: int, key_check: str) -> str:
    return ROOT if generation == 0 else f"{RECORDS}{generation:04d}-{key_check}"


def config_digest(config_bytes: bytes) -> str:
    return hashlib.sha256(config_bytes).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _body(record: Record) -> bytes:
    """What a record's MACs and owner signature authenticate: every field but those, canonically encoded."""
    body = copy.deepcopy(record)
    body.pop("mac", None)
    body.pop("owner_sig", None)
    body.get("retires", {}).pop("mac", None)
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def digest(record: Record) -> str:
    """The SHA-256 of a whole record (MACs and signature included): what its successor names."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def owner_signed(record: Record, owner_public: object) -> bool:
    """Whether the store owner's key signed ``record`` (a rotation)."""
    return owner_key.verify(owner_public, _body(record), record.get("owner_sig"))


def _signed(record: Record, key: MasterKey, retiring: MasterKey | None = None) -> Record:
    if retiring is not None:
        record["retires"]["mac"] = retiring.mac(_RETIRE_MAC, _body(record))
    record["mac"] = key.mac(_RECORD_MAC, _body(record))
    return record


def authentic(record: Record, key: MasterKey) -> bool:
    return record.get("key_check") == key.key_check and key.verify_mac(_RECORD_MAC, _body(record), record.get("mac"))


def retires(record: Record, key: MasterKey) -> bool:
    """Whether ``record`` is a rotation that ``key`` itself signed away."""
    retired = record.get("retires")
    return (
        isinstance(retired, dict)
        and retired.get("key_check") == key.key_check
        and key.verify_mac(_RETIRE_MAC, _body(record), retired.get("mac"))
    )


def root_record(key: MasterKey, config_bytes: bytes, gear: str, owner: OwnerKey | None = None) -> Record:
    """Generation 0: the store's first key, its config, its chunker's gear table and its owner key."""
    record: Record = {
        "version": RECORD_VERSION,
        "store_id": key.store_id,
        "generation": 0,
        "created": _now(),
        "key_check": key.key_check,
        "gear": gear,
        "config_sha256": config_digest(config_bytes),
    }
    if owner is not None:
        record["owner"] = owner.public
    return _signed(record, key)


def rotation_record(
    new: MasterKey,
    old: MasterKey,
    manifests: Iterable[str],
    indexes: Iterable[str],
    previous: Record,
    config_bytes: bytes,
    owner: OwnerKey | None,
) -> Record:
    """Generation ``old.generation + 1``: ``new`` replaces ``old`` and holds every key before it; signed by
    ``owner`` over the new key's check, the hash of ``previous`` (old's record) and the config's hash."""
    generation = old.generation + 1
    keys = [old, *(r.key for r in old.retired)]
    ring = {"keys": [{"generation": k.generation, "secret": _b64(k.secret_for_ring())} for k in keys]}
    name = record_name(generation, new.key_check)
    record = {
        "version": RECORD_VERSION,
        "store_id": new.store_id,
        "generation": generation,
        "created": _now(),
        "key_check": new.key_check,
        "gear": GEAR_KEYED,
        "ring": _b64(new.seal(KEYRING, name, json.dumps(ring).encode())),
        "sealed": {"manifests": sorted(manifests), "indexes": sorted(indexes)},
        "retires": {"generation": old.generation, "key_check": old.key_check},
        "previous_sha256": digest(previous),
        "config_sha256": config_digest(config_bytes),
    }
    if owner is not None:
        record["owner_sig"] = owner.sign(_body(record))
    return _signed(record, new, retiring=old)


def upgrade_record(key: MasterKey, generation: int, config_bytes: bytes, owner: OwnerKey) -> Record:
    """``keyring/owner``: ``owner`` signs the store's rotations after generation ``generation`` (``key``'s)."""
    record: Record = {
        "version": RECORD_VERSION,
        "store_id": key.store_id,
        "generation": generation,
        "created": _now(),
        "key_check": key.key_check,
        "owner": owner.public,
        "config_sha256": config_digest(config_bytes),
    }
    record["owner_sig"] = owner.sign(_body(record))
    record["mac"] = key.mac(_UPGRADE_MAC, _body(record))
    return record


def upgrade_authentic(record: Record, key: MasterKey) -> bool:
    """Whether ``keyring/owner`` was written by a holder of ``key`` (the generation it names)."""
    return record.get("key_check") == key.key_check and key.verify_mac(_UPGRADE_MAC, _body(record), record.get("mac"))


def read_upgrade(backend: Backend) -> tuple[Record | None, list[str]]:
    """``keyring/owner`` when the store has one that parses and its owner key signed, and why not otherwise."""
    try:
        record = json.loads(backend.get(UPGRADE))
        if not isinstance(record, dict) or not isinstance(record.get("generation"), int):
            raise ValueError("not a key record")
        if not owner_signed(record, record.get("owner")):
            raise ValueError("its owner key did not sign it")
    except NotFound:
        return None, []
    except (ValueError, TypeError) as exc:
        return None, [f"{UPGRADE} ignored: {exc}"]
    return record, []


def write_record(backend: Backend, record: Record) -> None:
    """Create a record; records are written once (an existing one is never replaced)."""
    name = record_name(record["generation"], record["key_check"])
    backend.put(name, json.dumps(record, indent=1).encode(), exclusive=True)


def read_records(backend: Backend) -> tuple[list[Record], list[str]]:
    """Every key record in the store, and a warning for each object under ``keyring/`` that is not one."""
    records, problems = [], []
    for name in sorted(backend.list(RECORDS)):
        if name == UPGRADE:
            continue  # read_upgrade
        match = _RECORD_NAME.match(name)
        try:
            if match is None:
                raise ValueError("not a key record name")
            record = json.loads(backend.get(name))
            if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
                raise ValueError("not a version-1 key record")
            if record.get("generation") != int(match.group(1)) or name != record_name(
                record["generation"], str(record.get("key_check"))
            ):
                raise ValueError("its name does not match its generation and key check")
        except (ValueError, TypeError, NotFound) as exc:
            problems.append(f"{name} ignored: {exc}")
            continue
        records.append(record)
    return records, problems


@dataclasses.dataclass
class Trust:
    """What the key records say of an opened key."""

    generation: int
    gear: str
    key_checks: list[str]  # of every generation up to this key's, oldest first
    retired_by: str | None = None  # when a newer generation retired this key (then it must not write)
    owner_key: str | None = None  # the store's owner key (public half) the open decided on, if any
    warnings: list[str] = dataclasses.field(default_factory=list)

    def vouches_for(self, key_check: str) -> bool:
        """Whether ``key_check`` (or the 16-hex prefix a recovery share prints) is one of this key's chain."""
        return any(k.startswith(key_check) for k in self.key_checks) if key_check else False


def establish(key: MasterKey, records: list[Record], config_bytes: bytes) -> Trust:
    """Check that ``key`` is the store's key of some generation and attach the keys it retired.

    ForeignKey: the key is not the store's (no record of its generation authenticates under it, or its
    chain does not lead back to the store's first key). IntegrityError: the key is the store's but the
    config, or a record of its chain, was changed or removed.
    """
    own = [r for r in records if authentic(r, key)]
    if not own:
        raise ForeignKey("the key it opens is not this store's (no key record of the store names it)")
    record = own[0]
    generation = record["generation"]
    keys = {generation: key, **_ring(key, record)}
    if sorted(keys) != list(range(generation + 1)):
        raise ForeignKey(f"the keyring of generation {generation} does not hold every earlier generation")
    chain = {}
    for k in range(generation + 1):
        found = next((r for r in records if r["generation"] == k and authentic(r, keys[k])), None)
        if found is None:
            raise ForeignKey(f"no key record of generation {k} authenticates under its key")
        if k > 0 and not retires(found, keys[k - 1]):
            raise ForeignKey(f"the key record of generation {k} was not signed by generation {k - 1}")
        chain[k] = found
    if chain[0].get("config_sha256") != config_digest(config_bytes):
        raise IntegrityError(
            "the store config drtool-store.json was changed after the store was created (its SHA-256 is not "
            "the one the store's key recorded)",
            "restore the original config object (a versioned bucket keeps it); see docs/threat-model.md",
        )
    retired = [RetiredKey(k, keys[k], _sealed_before(chain[k + 1])) for k in range(generation)]
    key.retire(retired, generation)
    trust = Trust(generation, str(record.get("gear", GEAR_SEED32)), [keys[k].key_check for k in sorted(keys)])
    later = [r for r in records if r["generation"] == generation + 1]
    successor = next((r for r in later if retires(r, key)), None)
    if successor is not None:
        trust.retired_by = f"generation {generation + 1}, {successor.get('created')}"
        key.retired_after(_sealed_before(successor))
    unexplained = [r for r in records if r not in chain.values() and r is not successor]
    if successor is None:  # a retired key cannot check what its successors wrote
        trust.warnings += [
            f"key record {record_name(r['generation'], str(r.get('key_check')))} ignored: it does not authenticate "
            "under this store's keys (planted?)"
            for r in unexplained
        ]
    return trust


def attach_ring(key: MasterKey, records: list[Record]) -> Trust:
    """The trust of a key already checked by another process (a plan step's): its ring, no pins or config."""
    record = next((r for r in records if authentic(r, key)), None)
    if record is None:
        return Trust(0, GEAR_SEED32, [key.key_check])
    generation = record["generation"]
    keys = {generation: key, **_ring(key, record)}
    sealed = {r["generation"]: r for r in records if r["generation"] <= generation}
    retired = [RetiredKey(k, keys[k], _sealed_before(sealed.get(k + 1, {}))) for k in range(generation)]
    key.retire(retired, generation)
    return Trust(generation, str(record.get("gear", GEAR_SEED32)), [keys[k].key_check for k in sorted(keys)])


def write_root(backend: Backend, key: MasterKey, config_bytes: bytes, gear: str) -> Record:
    """Write generation 0 for ``key``; when another process wrote it first, return theirs."""
    record = root_record(key, config_bytes, gear)
    try:
        write_record(backend, record)
    except ObjectExists:
        return json.loads(backend.get(ROOT))
    return record


def _ring(key: MasterKey, record: Record) -> dict[int, MasterKey]:
    if record["generation"] == 0:
        return {}
    name = record_name(record["generation"], record["key_check"])
    try:
        ring = json.loads(key.unseal(KEYRING, name, base64.b64decode(record["ring"])))
        keys = {int(e["generation"]): MasterKey(base64.b64decode(e["secret"]), key.store_id) for e in ring["keys"]}
    except (KeyError, TypeError, ValueError, IntegrityError) as exc:
        raise ForeignKey(f"the keyring of {name} does not open with this key ({exc})") from None
    for generation, old in keys.items():
        old.generation = generation
    return keys


def _sealed_before(record: Record) -> frozenset[str]:
    sealed = record.get("sealed") or {}
    return frozenset([*sealed.get("manifests", ()), *sealed.get("indexes", ())])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
