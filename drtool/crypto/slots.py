"""Key slots: the master key, wrapped under something a person or machine holds.

A slot is a small JSON document stored in the store under ``keys/<slot-id>``. Kinds:
- ``passphrase``: wrapping key = Argon2id(passphrase) with the RFC 9106 second recommended parameters;
- ``keyfile``: wrapping key = HKDF(32 random bytes kept in a file);
- ``recovery``: wrapping key = HKDF(recovery secret); the recovery secret is split into k-of-n Shamir
  shares that are printed and kept offline. Removing the slot revokes every share of it.
The wrapped master key is AES-256-GCM sealed with the slot id and store id as associated data, so a
slot cannot be moved to another store or renamed.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import secrets
import zlib
from typing import Any

from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from drtool.crypto import shamir
from drtool.crypto.master import MasterKey, hkdf
from drtool.errors import IntegrityError, UsageError, WrongKey

SLOT_VERSION = 1
ARGON2_DEFAULTS = {"memory_kib": 65536, "iterations": 3, "lanes": 4}


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

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> KeySlot:
        try:
            raw = json.loads(data)
            slot = cls(**raw)
        except (ValueError, TypeError) as exc:
            raise IntegrityError(f"key slot {name} is malformed: {exc}") from None
        if slot.version != SLOT_VERSION:
            raise UsageError(f"key slot {name} has version {slot.version}", "upgrade drtool")
        return slot

    def summary(self) -> dict[str, Any]:
        info = {"id": self.id, "kind": self.kind, "label": self.label, "created": self.created}
        if self.kind == "recovery":
            info["shares"] = f"{self.kdf['threshold']}-of-{self.kdf['count']}"
        return info


def _argon2(passphrase: str, salt: bytes, params: dict[str, Any]) -> bytes:
    return Argon2id(
        salt=salt,
        length=32,
        iterations=params["iterations"],
        lanes=params["lanes"],
        memory_cost=params["memory_kib"],
    ).derive(passphrase.encode())


def _make_slot(kind: str, label: str, kdf: dict[str, Any], wrap_key: bytes, master: MasterKey) -> KeySlot:
    slot_id = secrets.token_hex(4)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return KeySlot(slot_id, kind, label, now, kdf, _b64(master.wrap(wrap_key, slot_id)))


def passphrase_slot(master: MasterKey, passphrase: str, label: str = "passphrase") -> KeySlot:
    if len(passphrase) < 8:
        raise UsageError("passphrase is too short", "use at least 8 characters; longer is better")
    salt = secrets.token_bytes(16)
    kdf = {"name": "argon2id", "salt": _b64(salt), **ARGON2_DEFAULTS}
    return _make_slot("passphrase", label, kdf, _argon2(passphrase, salt, kdf), master)


def keyfile_slot(master: MasterKey, keyfile_secret: bytes, label: str = "key file") -> KeySlot:
    salt = secrets.token_bytes(16)
    wrap = hkdf(keyfile_secret, b"drtool v1 keyfile slot", salt=salt)
    return _make_slot("keyfile", label, {"name": "hkdf-sha256", "salt": _b64(salt)}, wrap, master)


def recovery_slot(
    master: MasterKey, threshold: int, count: int, label: str = "recovery shares"
) -> tuple[KeySlot, list[str]]:
    """A recovery slot plus its printable shares; the shares are shown once and never stored."""
    recovery_secret = secrets.token_bytes(32)
    salt = secrets.token_bytes(16)
    kdf = {"name": "hkdf-sha256", "salt": _b64(salt), "threshold": threshold, "count": count}
    wrap = hkdf(recovery_secret, b"drtool v1 recovery slot", salt=salt)
    slot = _make_slot("recovery", label, kdf, wrap, master)
    split = shamir.split(recovery_secret, threshold, count)
    return slot, [format_share(master.store_id, slot.id, threshold, x, y) for x, y in split]


def unwrap(slot: KeySlot, store_id: str, wrap_key: bytes) -> MasterKey | None:
    """The master key if ``wrap_key`` opens the slot, else None."""
    try:
        return MasterKey.unwrap(wrap_key, _unb64(slot.wrapped), store_id, slot.id)
    except IntegrityError:
        return None


def open_with_passphrase(slot: KeySlot, store_id: str, passphrase: str) -> MasterKey | None:
    return unwrap(slot, store_id, _argon2(passphrase, _unb64(slot.kdf["salt"]), slot.kdf))


def open_with_keyfile(slot: KeySlot, store_id: str, keyfile_secret: bytes) -> MasterKey | None:
    wrap = hkdf(keyfile_secret, b"drtool v1 keyfile slot", salt=_unb64(slot.kdf["salt"]))
    return unwrap(slot, store_id, wrap)


def open_with_shares(slot: KeySlot, store_id: str, shares: list[str]) -> MasterKey | None:
    parsed = [parse_share(s) for s in shares]
    mine = [p for p in parsed if p.store_id == store_id and p.slot_id == slot.id]
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

KEYFILE_HEADER = "drtool-keyfile-v1"


def new_keyfile_text() -> tuple[str, bytes]:
    secret = secrets.token_bytes(32)
    return f"{KEYFILE_HEADER}\n{_b64(secret)}\n", secret


def parse_keyfile(text: str, path: str) -> bytes:
    lines = text.strip().splitlines()
    try:
        if lines[0] != KEYFILE_HEADER:
            raise ValueError
        secret = _unb64(lines[1])
        if len(secret) != 32:
            raise ValueError
        return secret
    except (IndexError, ValueError):
        raise UsageError(
            f"{path} is not a drtool key file", "give the file written by `drtool key add --keyfile`"
        ) from None


# --- recovery shares ---------------------------------------------------------------------------------
# Printable form, one line per share, checksummed so a typo is caught before interpolation:
#   drtool-share-v1:<store id>:<slot id>:<threshold>:<x>:<base32 y>:<crc32 hex>

_SHARE_PREFIX = "drtool-share-v1"


@dataclasses.dataclass(frozen=True)
class Share:
    store_id: str
    slot_id: str
    threshold: int
    x: int
    y: bytes


def format_share(store_id: str, slot_id: str, threshold: int, x: int, y: bytes) -> str:
    body = f"{_SHARE_PREFIX}:{store_id}:{slot_id}:{threshold}:{x}:{base64.b32encode(y).decode().rstrip('=')}"
    return f"{body}:{zlib.crc32(body.encode()):08x}"


def parse_share(text: str) -> Share:
    text = "".join(text.split())  # shares may be printed with spaces or line breaks
    try:
        body, crc = text.rsplit(":", 1)
        prefix, store_id, slot_id, threshold, x, y32 = body.split(":")
        if prefix != _SHARE_PREFIX:
            raise ValueError
    except ValueError:
        raise UsageError("a recovery share is malformed", f"shares look like {_SHARE_PREFIX}:...") from None
    if f"{zlib.crc32(body.encode()):08x}" != crc.lower():
        raise UsageError(f"recovery share #{x} has a typo (checksum mismatch)", "re-type it from the printout")
    y = base64.b32decode(y32 + "=" * (-len(y32) % 8))
    return Share(store_id, slot_id, int(threshold), int(x), y)
