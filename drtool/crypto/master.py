"""The master key: the one secret that authenticates, encrypts and names everything in a store.

Subkeys are derived with HKDF-SHA256 so each purpose has its own key:
- ``aead``: AES-256-GCM for chunks, manifests and other sealed objects (random 96-bit nonces);
- ``ids``: the key of chunk ids, so an id reveals nothing about plaintext without the key: HMAC-SHA-256 in
  format 1, keyed BLAKE3 in format 2 (its own subkey; 0.2 CPU-s per GiB against HMAC's 0.9 on the
  machines of docs/performance.md, and it runs outside the GIL);
- ``chunker``: the seed of the content-defined chunker's gear table, so chunk boundaries do not
  fingerprint known files.

The key also owns the associated data of everything it seals (``associated_data``): each sealed object is
bound to its kind, its store and its name, so objects cannot be swapped, renamed or moved between stores
without detection. The raw secret never leaves this object except wrapped into a key slot (``wrap``).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Callable

import blake3
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from drtool.errors import IntegrityError

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
SEAL_OVERHEAD = NONCE_BYTES + 16
# kinds of sealed objects (docs/store-format.md): part of every object's associated data
CHUNK, MANIFEST, LOCK, KEY_SLOT = "chunk", "manifest", "lock", "keyslot"
BLOB, PACK, INDEX, PART = "blob", "pack", "index", "part"  # format 2: a chunk in a pack, a pack's header, ...
SHOWN = {CHUNK: 12, BLOB: 12}  # characters of a name that error messages show (chunk ids are 64 hex digits)
ChunkHasher = Callable[[bytes | bytearray | memoryview], str]


def associated_data(kind: str, store_id: str, name: str) -> bytes:
    """``drtool-<kind>-v1:<store id>:<name>``: the associated data of a sealed object (docs/store-format.md)."""
    return f"drtool-{kind}-v1:{store_id}:{name}".encode()


def hkdf(secret: bytes, info: bytes, length: int = 32, salt: bytes | None = None) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(secret)


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """nonce || AES-256-GCM(plaintext, aad) — the layout of every encrypted object (store-format.md)."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def unseal(key: bytes, blob: bytes, aad: bytes, what: str) -> bytes:
    if len(blob) < SEAL_OVERHEAD:
        raise IntegrityError(f"{what} is truncated ({len(blob)} bytes)", "run `drtool check --read-data`")
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except InvalidTag:
        raise IntegrityError(
            f"{what} failed authentication (corrupted, swapped or from another store)",
            "run `drtool check --read-data` to list every damaged object",
        ) from None


class MasterKey:
    """The master key of one store: its derived subkeys, and the raw secret kept only to wrap it into slots."""

    def __init__(self, secret: bytes, store_id: str) -> None:
        if len(secret) != MASTER_KEY_BYTES:
            raise ValueError("master key must be 32 bytes")
        self._secret = secret
        self.store_id = store_id
        self._aead_key = hkdf(secret, b"drtool v1 aead")
        self._id_key = hkdf(secret, b"drtool v1 chunk ids")
        self._blake3_id_key = hkdf(secret, b"drtool v2 chunk ids blake3")
        self.chunker_seed = int.from_bytes(hkdf(secret, b"drtool v1 chunker seed", 4), "little")

    @classmethod
    def generate(cls, store_id: str) -> MasterKey:
        return cls(secrets.token_bytes(MASTER_KEY_BYTES), store_id)

    @classmethod
    def unwrap(cls, wrap_key: bytes, blob: bytes, store_id: str, slot_id: str) -> MasterKey:
        """The master key a key slot holds; IntegrityError when ``wrap_key`` does not open it."""
        secret = unseal(wrap_key, blob, associated_data(KEY_SLOT, store_id, slot_id), f"key slot {slot_id}")
        return cls(secret, store_id)

    def wrap(self, wrap_key: bytes, slot_id: str) -> bytes:
        """This key sealed under a key slot's wrapping key: the one way the raw secret leaves this object."""
        return seal(wrap_key, self._secret, associated_data(KEY_SLOT, self.store_id, slot_id))

    def __eq__(self, other: object) -> bool:
        """The same secret for the same store (compared in constant time)."""
        if not isinstance(other, MasterKey):
            return NotImplemented
        return other.store_id == self.store_id and hmac.compare_digest(other._secret, self._secret)

    __hash__ = None  # type: ignore[assignment]  # a key is not a dict key

    def chunk_id(self, data: bytes | memoryview) -> str:
        return hmac.digest(self._id_key, data, "sha256").hex()

    def chunk_hasher(self, algorithm: str) -> ChunkHasher:
        """The chunk-id function a store's config names (``hmac-sha256``: format 1, ``blake3-keyed``: 2)."""
        if algorithm == "hmac-sha256":
            return self.chunk_id
        if algorithm == "blake3-keyed":
            key = self._blake3_id_key
            return lambda data: blake3.blake3(data, key=key).hexdigest()
        raise ValueError(f"unknown chunk id algorithm {algorithm!r}")

    def seal_into(self, kind: str, name: str, data: bytes | bytearray | memoryview, out: memoryview) -> None:
        """Like ``seal``, written into ``out`` (``len(data) + SEAL_OVERHEAD`` bytes): the data path seals every
        byte it stores straight into the pack being built, with no buffer of its own to allocate and copy."""
        nonce = os.urandom(NONCE_BYTES)
        out[:NONCE_BYTES] = nonce
        aad = associated_data(kind, self.store_id, name)
        AESGCM(self._aead_key).encrypt_into(nonce, data, aad, out[NONCE_BYTES:])

    def seal(self, kind: str, name: str, data: bytes) -> bytes:
        """``data`` sealed as the object ``name`` of ``kind`` in this key's store."""
        return seal(self._aead_key, data, associated_data(kind, self.store_id, name))

    def unseal(self, kind: str, name: str, blob: bytes) -> bytes:
        """What ``seal(kind, name, ...)`` sealed; IntegrityError when the blob was damaged, swapped or moved."""
        shown = name[: SHOWN[kind]] if kind in SHOWN else name
        return unseal(self._aead_key, blob, associated_data(kind, self.store_id, name), f"{kind} {shown}")
