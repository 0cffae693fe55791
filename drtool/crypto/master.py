"""The master key: the one secret that authenticates, encrypts and names everything in a store.

Subkeys are derived with HKDF-SHA256 so each purpose has its own key:
- ``aead``: AES-256-GCM for chunks, manifests and other sealed objects (random 96-bit nonces);
- ``ids``: HMAC-SHA-256 for chunk ids, so an id reveals nothing about plaintext without the key (HMAC,
  not keyed BLAKE2b: SHA-NI makes it about twice as fast on current x86 and ARM servers);
- ``chunker``: the seed of the content-defined chunker's gear table, so chunk boundaries do not
  fingerprint known files.
"""

from __future__ import annotations

import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from drtool.errors import IntegrityError

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
SEAL_OVERHEAD = NONCE_BYTES + 16


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
    """Holds the derived subkeys; the raw secret is only kept to wrap it into new key slots."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != MASTER_KEY_BYTES:
            raise ValueError("master key must be 32 bytes")
        self.secret = secret
        self.aead_key = hkdf(secret, b"drtool v1 aead")
        self.id_key = hkdf(secret, b"drtool v1 chunk ids")
        self.chunker_seed = int.from_bytes(hkdf(secret, b"drtool v1 chunker seed", 4), "little")

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(secrets.token_bytes(MASTER_KEY_BYTES))

    def chunk_id(self, data: bytes | memoryview) -> str:
        return hmac.digest(self.id_key, data, "sha256").hex()

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        return seal(self.aead_key, plaintext, aad)

    def unseal(self, blob: bytes, aad: bytes, what: str) -> bytes:
        return unseal(self.aead_key, blob, aad, what)
