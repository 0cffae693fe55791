"""The store owner's signing key: what makes a key rotation the owner's and not the CronJob's.

The CronJob holds the master key (its key file opens a slot) and can write the store, so anything the
master key authenticates (HMACs, sealed objects) it can also forge: a rotation record among them. A
rotation is therefore signed by a second key, an Ed25519 key made at ``init`` whose public half is in the
store's first key record and whose private half is sealed only into *owner-class* slots (passphrase and
recovery shares, never a key file: drtool/crypto/slots.py). A key record that this key did not sign is
ignored (drtool/repo/trust.py), so the CronJob's identity cannot make a new key generation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

OWNER_KEY_BYTES = 32


class OwnerKey:
    """The private owner key, held only while a store is open with an owner-class credential."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public = base64.b64encode(raw).decode()

    @classmethod
    def generate(cls) -> OwnerKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_secret(cls, secret: bytes) -> OwnerKey:
        return cls(Ed25519PrivateKey.from_private_bytes(secret))

    def secret(self) -> bytes:
        """The raw private key, for sealing into an owner-class slot (and nowhere else)."""
        return self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self._private.sign(data)).decode()


def fingerprint(public: str) -> str:
    """What drtool prints for an owner key: the first 16 hex digits of the SHA-256 of its public key."""
    return hashlib.sha256(public.encode()).hexdigest()[:16]


def verify(public: object, data: bytes, signature: object) -> bool:
    """Whether ``signature`` (base64) is the owner key ``public``'s (base64, raw Ed25519) over ``data``."""
    if not (isinstance(public, str) and isinstance(signature, str)):
        return False
    try:
        raw = base64.b64decode(public, validate=True)
        if len(raw) != OWNER_KEY_BYTES:
            return False
        Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(signature, validate=True), data)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True
