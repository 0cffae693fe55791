"""Key slots: the master key, wrapped under something a person or machine holds.

A slot is a small JSON document stored in the store under ``keys/<slot-id>``. Kinds:
- ``passphrase``: wrapping key = Argon2id(passphrase) with the RFC 9106 second recommended parameters;
- ``keyfile``: wrapping key = HKDF(32 random bytes kept in a file);
- ``recovery``: wrapping key = HKDF(recovery secret); the recovery secret is split into k-of-n Shamir
  shares that are printed and kept offline. Removing the slot revokes every share of it.
The wrapped master key is AES-256-GCM sealed with the slot id and store id as associated data, so a
slot cannot be moved to another store or renamed.

Anyone who can write ``keys/`` can plant a slot (docs/threat-model.md), so a slot is data to check, not to
trust: its settings are bounded before any KDF runs (``check_slot``: Argon2 between RFC 9106's two
recommended options), a version-2 slot carries an HMAC of its metadata under the master key
(``authentic``), and the key a slot opens must be the store's (drtool/repo/keyring.py) before it is used.

A version-3 slot also carries the store owner's signing key (``owner``, drtool/crypto/owner.py), sealed under
the same wrapping key: only passphrase and recovery slots do (owner-class credentials); a key file, which
the CronJob holds, never opens the owner key.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
import re
import secrets
import threading
import zlib
from concurrent.futures import Future
from typing import Any

from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from drtool.crypto import shamir
from drtool.crypto.master import MASTER_KEY_BYTES, SEAL_OVERHEAD, MasterKey, associated_data, hkdf, seal, unseal
from drtool.crypto.owner import OwnerKey
from drtool.errors import IntegrityError, UsageError, WrongKey

SLOT_VERSION = 2  # 2: metadata authenticated by ``mac``; 1 (drtool 0.1): without it, still read
OWNER_SLOT_VERSION = 3  # 3: a version-2 slot that also seals the owner key (``owner``)
READABLE_SLOT_VERSIONS = (1, 2, 3)
OWNER_KINDS = ("passphrase", "recovery")  # the credentials that may hold the owner key
KINDS = ("passphrase", "keyfile", "recovery")
ARGON2_DEFAULTS = {"memory_kib": 65536, "iterations": 3, "lanes": 4}
# what a slot's Argon2 settings may be, so a planted slot can neither be cheap to try nor exhaust the reader:
# memory x passes between RFC 9106's second recommended option (64 MiB, 3 passes) and its first (2 GiB, 1)
ARGON2_BOUNDS = {"memory_kib": (65536, 2097152), "iterations": (1, 32), "lanes": (1, 16)}
ARGON2_WORK = (65536 * 3, 2097152 * 1)
SALT_BYTES = (16, 64)
SLOT_ID = re.compile(r"^[0-9a-f]{8,32}$")
_MAC_PURPOSE = "keyslot"
_OWNER_KIND = "owner"  # the associated data's kind of the owner key sealed in a slot


class SlotRejected(Exception):
    """A slot drtool will not use, and why (reported by name, then skipped)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


@dataclasses.dataclass
class KeySlot:
    id: str
    kind: str  # passphrase | keyfile | recovery
    label: str
    created: str
    kdf: dict[str, Any]
    wrapped: str  # base64(nonce || AES-GCM(master secret))
    version: int = SLOT_VERSION
    mac: str = ""  # version 2: HMAC of the other fields under the master key's store-auth subkey
    owner: str = ""  # version 3: base64(nonce || AES-GCM(owner signing key)) under the same wrapping key

    def _fields(self) -> dict[str, Any]:
        """The fields this slot's version has (a version-2 slot's mac covers no ``owner`` field)."""
        fields = dataclasses.asdict(self)
        if self.version < OWNER_SLOT_VERSION:
            del fields["owner"]
        if self.version == 1:
            del fields["mac"]
        return fields

    def to_bytes(self) -> bytes:
        return json.dumps(self._fields(), indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> KeySlot:
        """The slot stored under ``name`` (``keys/<id>``); SlotRejected when it is not a slot this drtool reads."""
        slot_id = name.rsplit("/", 1)[-1]
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            version = raw.get("version")
            if version not in READABLE_SLOT_VERSIONS:
                raise SlotRejected(f"version {version!r} is not one this drtool reads ({READABLE_SLOT_VERSIONS})")
            if version == 1 and "mac" in raw:
                raise ValueError("a version-1 slot has no mac")
            if version != OWNER_SLOT_VERSION and "owner" in raw:
                raise ValueError(f"a version-{version} slot has no owner key")
            slot = cls(**raw)
            _require(all(isinstance(getattr(slot, f), str) for f in ("id", "kind", "label", "created", "wrapped")))
            _require(isinstance(slot.owner, str))
            _require(isinstance(slot.kdf, dict) and isinstance(slot.mac, str))
        except SlotRejected:
            raise
        except (ValueError, TypeError) as exc:
            raise SlotRejected(f"malformed ({str(exc).splitlines()[0][:120]})") from None
        if slot.id != slot_id or not SLOT_ID.match(slot.id):
            raise SlotRejected(f"its id {slot.id!r} is not its name")
        return slot

    def summary(self) -> dict[str, Any]:
        info = {"id": self.id, "kind": self.kind, "label": self.label, "created": self.created}
        if self.kind == "recovery":
            info["shares"] = f"{self.kdf['threshold']}-of-{self.kdf['count']}"
        return info

    def signed_fields(self) -> bytes:
        """What ``mac`` authenticates: every other field, canonically encoded."""
        fields = self._fields()
        fields.pop("mac", None)
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    def authentic(self, master: MasterKey) -> bool | None:
        """Whether the slot's metadata (label, kind, settings) is what a holder of ``master`` wrote; None for a
        version-1 slot, which carries no mac."""
        if self.version == 1:
            return None
        return master.verify_mac(_MAC_PURPOSE, self.signed_fields(), self.mac)


def _require(condition: bool) -> None:
    if not condition:
        raise ValueError("a field has the wrong type")


def check_slot(slot: KeySlot) -> str | None:
    """Why a slot of a kind this drtool opens must not be tried (bounds, shapes), or None. Checked before any
    KDF runs: a planted slot can make opening neither cheap to brute-force nor slow or memory-hungry."""
    if slot.kind not in KINDS:
        return None  # not tried by any credential (another drtool's kind); listed, never opened
    kdf = slot.kdf
    try:
        salt = _unb64(kdf["salt"])
        wrapped = _unb64(slot.wrapped)
    except (KeyError, TypeError, ValueError, binascii.Error):
        return "its salt or wrapped key is not base64"
    if not SALT_BYTES[0] <= len(salt) <= SALT_BYTES[1]:
        return f"its salt is {len(salt)} bytes (allowed {SALT_BYTES[0]}..{SALT_BYTES[1]})"
    if len(wrapped) != MASTER_KEY_BYTES + SEAL_OVERHEAD:
        return f"its wrapped key is {len(wrapped)} bytes, not {MASTER_KEY_BYTES + SEAL_OVERHEAD}"
    if slot.kind == "passphrase":
        return _check_argon2(kdf)
    if kdf.get("name") != "hkdf-sha256":
        return f"kind {slot.kind} with KDF {kdf.get('name')!r}"
    if slot.kind == "recovery":
        threshold, count = kdf.get("threshold"), kdf.get("count")
        if not (isinstance(threshold, int) and isinstance(count, int) and 1 <= threshold <= count <= 255):
            return f"its share counts {threshold!r} of {count!r} are not 1 <= threshold <= count <= 255"
    return None


def _check_argon2(kdf: dict[str, Any]) -> str | None:
    if kdf.get("name") != "argon2id":
        return f"a passphrase slot with KDF {kdf.get('name')!r}"
    for param, (low, high) in ARGON2_BOUNDS.items():
        value = kdf.get(param)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            return f"Argon2 {param} {value!r} is outside {low}..{high}"
    work = kdf["memory_kib"] * kdf["iterations"]
    if not ARGON2_WORK[0] <= work <= ARGON2_WORK[1]:
        return (
            f"Argon2 memory x iterations {work} KiB is outside {ARGON2_WORK[0]}..{ARGON2_WORK[1]} "
            "(RFC 9106's recommended options)"
        )
    return None


# derivations started ahead (``derive_ahead``), by their inputs; each is taken by the one call that needs it
_ahead: dict[tuple[str, bytes, int, int, int], Future[bytes]] = {}


def derive_ahead(passphrase: str, slot: KeySlot) -> None:
    """Start deriving ``slot``'s wrapping key from ``passphrase`` in a thread, for ``open_with_passphrase`` of
    the same slot and passphrase to wait for instead of deriving it again. Argon2id releases the GIL, so its
    0.18 CPU-s (the default settings, four lanes) run beside the imports a process still makes before it opens
    the store (drtool/cli/entry.py). Only a slot ``check_slot`` passes: a planted slot's settings are bounded
    before any KDF runs, ahead or not."""
    if slot.kind != "passphrase" or check_slot(slot) is not None:
        return
    salt = _unb64(slot.kdf["salt"])
    future: Future[bytes] = Future()
    _ahead[_ahead_key(passphrase, salt, slot.kdf)] = future

    def derive() -> None:
        try:
            future.set_result(_derive(passphrase, salt, slot.kdf))
        except BaseException as exc:  # handed to the caller that waits for it, as a direct call would raise it
            future.set_exception(exc)

    threading.Thread(target=derive, name="argon2id-ahead", daemon=True).start()


def _ahead_key(passphrase: str, salt: bytes, params: dict[str, Any]) -> tuple[str, bytes, int, int, int]:
    return passphrase, salt, params["memory_kib"], params["iterations"], params["lanes"]


def _argon2(passphrase: str, salt: bytes, params: dict[str, Any]) -> bytes:
    ahead = _ahead.pop(_ahead_key(passphrase, salt, params), None)
    return ahead.result() if ahead is not None else _derive(passphrase, salt, params)


def _derive(passphrase: str, salt: bytes, params: dict[str, Any]) -> bytes:
    return Argon2id(
        salt=salt,
        length=32,
        iterations=params["iterations"],
        lanes=params["lanes"],
        memory_cost=params["memory_kib"],
    ).derive(passphrase.encode())


def _make_slot(
    kind: str, label: str, kdf: dict[str, Any], wrap_key: bytes, master: MasterKey, owner: OwnerKey | None = None
) -> KeySlot:
    slot_id = secrets.token_hex(4)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    slot = KeySlot(slot_id, kind, label, now, kdf, _b64(master.wrap(wrap_key, slot_id)))
    if owner is not None:
        slot.version = OWNER_SLOT_VERSION
        slot.owner = _b64(seal(wrap_key, owner.secret(), associated_data(_OWNER_KIND, master.store_id, slot_id)))
    slot.mac = master.mac(_MAC_PURPOSE, slot.signed_fields())
    return slot


def passphrase_slot(
    master: MasterKey, passphrase: str, label: str = "passphrase", owner: OwnerKey | None = None
) -> KeySlot:
    """A passphrase slot; with ``owner``, the passphrase also opens the owner key (rotations, owner slots)."""
    if len(passphrase) < 8:
        raise UsageError("passphrase is too short", "use at least 8 characters; longer is better")
    salt = secrets.token_bytes(16)
    kdf = {"name": "argon2id", "salt": _b64(salt), **ARGON2_DEFAULTS}
    return _make_slot("passphrase", label, kdf, _argon2(passphrase, salt, kdf), master, owner)


def keyfile_slot(master: MasterKey, keyfile_secret: bytes, label: str = "key file") -> KeySlot:
    salt = secrets.token_bytes(16)
    wrap = hkdf(keyfile_secret, b"drtool v1 keyfile slot", salt=salt)
    return _make_slot("keyfile", label, {"name": "hkdf-sha256", "salt": _b64(salt)}, wrap, master)


def recovery_slot(
    master: MasterKey, threshold: int, count: int, label: str = "recovery shares", owner: OwnerKey | None = None
) -> tuple[KeySlot, list[str]]:
    """A recovery slot plus its printable shares; the shares are shown once and never stored."""
    recovery_secret = secrets.token_bytes(32)
    salt = secrets.token_bytes(16)
    kdf = {"name": "hkdf-sha256", "salt": _b64(salt), "threshold": threshold, "count": count}
    wrap = hkdf(recovery_secret, b"drtool v1 recovery slot", salt=salt)
    slot = _make_slot("recovery", label, kdf, wrap, master, owner)
    split = shamir.split(recovery_secret, threshold, count)
    return slot, [format_share(master.store_id, slot.id, threshold, x, y, master.key_check) for x, y in split]


@dataclasses.dataclass(frozen=True)
class Unwrapped:
    """What a slot holds for the credential that opened it: the master key and, in an owner-class slot of
    version 3, the owner key (None when the slot has none or it does not open)."""

    master: MasterKey
    owner: OwnerKey | None = None


def unwrap(slot: KeySlot, store_id: str, wrap_key: bytes) -> Unwrapped | None:
    """The master key (and owner key) if ``wrap_key`` opens the slot, else None."""
    try:
        master = MasterKey.unwrap(wrap_key, _unb64(slot.wrapped), store_id, slot.id)
    except IntegrityError:
        return None
    if not slot.owner or slot.kind not in OWNER_KINDS:
        return Unwrapped(master)
    try:
        aad = associated_data(_OWNER_KIND, store_id, slot.id)
        secret = unseal(wrap_key, _unb64(slot.owner), aad, f"the owner key of key slot {slot.id}")
        return Unwrapped(master, OwnerKey.from_secret(secret))
    except (IntegrityError, ValueError, binascii.Error):
        return Unwrapped(master)  # a damaged owner field: the slot's mac says so (``authentic``)


def open_with_passphrase(slot: KeySlot, store_id: str, passphrase: str) -> Unwrapped | None:
    return unwrap(slot, store_id, _argon2(passphrase, _unb64(slot.kdf["salt"]), slot.kdf))


def open_with_keyfile(slot: KeySlot, store_id: str, keyfile_secret: bytes) -> Unwrapped | None:
    wrap = hkdf(keyfile_secret, b"drtool v1 keyfile slot", salt=_unb64(slot.kdf["salt"]))
    return unwrap(slot, store_id, wrap)


def shares_for(slot: KeySlot, store_id: str, shares: list[str]) -> list[Share]:
    """The shares among ``shares`` that belong to ``slot`` of this store."""
    return [p for p in map(parse_share, shares) if p.store_id == store_id and p.slot_id == slot.id]


def open_with_shares(slot: KeySlot, store_id: str, shares: list[str]) -> Unwrapped | None:
    mine = shares_for(slot, store_id, shares)
    if not mine:
        return None
    if len(mine) < slot.kdf["threshold"]:
        raise WrongKey(
            f"{len(mine)} recovery share(s) given for slot {slot.id}, it needs {slot.kdf['threshold']}",
            "collect more shares from their keepers",
        )
    secret = shamir.combine([(p.x, p.y) for p in mine])
    wrap = hkdf(secret, b"drtool v1 recovery slot", salt=_unb64(slot.kdf["salt"]))
    return unwrap(slot, store_id, wrap)


# --- keyfiles ---------------------------------------------------------------------------------------
# Version 2 adds a line naming the store and the key check of the key it opens (docs/store-format.md), so
# a key file never opens a key other than the one it was made for, even on a machine without a pin.

KEYFILE_HEADER = "drtool-keyfile-v1"
KEYFILE_HEADER_V2 = "drtool-keyfile-v2"


@dataclasses.dataclass(frozen=True)
class KeyFile:
    secret: bytes = dataclasses.field(repr=False)
    store_id: str | None = None  # version 2
    key_check: str | None = None  # version 2: the key check of the key generation its slot wraps


def new_keyfile_text(master: MasterKey | None = None) -> tuple[str, bytes]:
    """A new key file's text and secret; version 2, bound to ``master``, when it is given."""
    secret = secrets.token_bytes(32)
    return keyfile_text(secret, master), secret


def keyfile_text(secret: bytes, master: MasterKey | None = None) -> str:
    if master is None:
        return f"{KEYFILE_HEADER}\n{_b64(secret)}\n"
    return f"{KEYFILE_HEADER_V2}\n{_b64(secret)}\nstore {master.store_id} key-check {master.key_check}\n"


def read_keyfile(text: str, path: str) -> KeyFile:
    lines = text.strip().splitlines()
    try:
        if lines[0] not in (KEYFILE_HEADER, KEYFILE_HEADER_V2):
            raise ValueError
        secret = _unb64(lines[1])
        if len(secret) != 32:
            raise ValueError
        if lines[0] == KEYFILE_HEADER:
            return KeyFile(secret)
        word, store_id, check_word, key_check = lines[2].split()
        if (word, check_word) != ("store", "key-check") or not re.fullmatch(r"[0-9a-f]{32}", key_check):
            raise ValueError
        return KeyFile(secret, store_id, key_check)
    except (IndexError, ValueError, binascii.Error):
        raise UsageError(
            f"{path} is not a drtool key file", "give the file written by `drtool key add --keyfile`"
        ) from None


def parse_keyfile(text: str, path: str) -> bytes:
    """The secret of a key file (either version)."""
    return read_keyfile(text, path).secret


# --- recovery shares ---------------------------------------------------------------------------------
# Printable form, one line per share, checksummed so a typo is caught before interpolation:
#   drtool-share-v2:<store id>:<slot id>:<key check, 16 hex>:<threshold>:<x>:<base32 y>:<crc32 hex>
# Version 1 (drtool 0.1) has no key check field and is still read.

_SHARE_PREFIX = "drtool-share-v1"
_SHARE_PREFIX_V2 = "drtool-share-v2"
SHARE_KEY_CHECK_HEX = 16  # 64 bits: a share names the key it opens without making a printed line much longer


@dataclasses.dataclass(frozen=True)
class Share:
    store_id: str
    slot_id: str
    threshold: int
    x: int
    y: bytes
    key_check: str | None = None  # version 2: the first 16 hex digits of the key check


def format_share(store_id: str, slot_id: str, threshold: int, x: int, y: bytes, key_check: str | None = None) -> str:
    y32 = base64.b32encode(y).decode().rstrip("=")
    if key_check is None:
        body = f"{_SHARE_PREFIX}:{store_id}:{slot_id}:{threshold}:{x}:{y32}"
    else:
        body = f"{_SHARE_PREFIX_V2}:{store_id}:{slot_id}:{key_check[:SHARE_KEY_CHECK_HEX]}:{threshold}:{x}:{y32}"
    return f"{body}:{zlib.crc32(body.encode()):08x}"


def parse_share(text: str) -> Share:
    text = "".join(text.split())  # shares may be printed with spaces or line breaks
    try:
        body, crc = text.rsplit(":", 1)
        fields = body.split(":")
        if fields[0] == _SHARE_PREFIX_V2 and len(fields) == 7:
            store_id, slot_id, key_check, threshold, x, y32 = fields[1:]
        elif fields[0] == _SHARE_PREFIX and len(fields) == 6:
            store_id, slot_id, threshold, x, y32 = fields[1:]
            key_check = None
        else:
            raise ValueError
    except ValueError:
        raise UsageError("a recovery share is malformed", f"shares look like {_SHARE_PREFIX_V2}:...") from None
    if f"{zlib.crc32(body.encode()):08x}" != crc.lower():
        raise UsageError(f"recovery share #{x} has a typo (checksum mismatch)", "re-type it from the printout")
    try:
        y = base64.b32decode(y32 + "=" * (-len(y32) % 8))
        return Share(store_id, slot_id, int(threshold), int(x), y, key_check)
    except (ValueError, binascii.Error):
        raise UsageError(f"recovery share #{x} is malformed", "re-type it from the printout") from None
