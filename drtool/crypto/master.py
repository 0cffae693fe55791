"""The master key: the one secret that authenticates, encrypts and names everything in a store.

Subkeys are derived with HKDF-SHA256 so each purpose has its own key:
- ``aead``: AES-256-GCM for chunks, manifests and other sealed objects (random 96-bit nonces);
- ``ids``: the key of chunk ids, so an id reveals nothing about plaintext without the key: HMAC-SHA-256 in
  format 1, keyed BLAKE3 in format 2 (its own subkey; 0.2 CPU-s per GiB against HMAC's 0.9 on the
  machines of docs/performance.md, and it runs outside the GIL);
- ``chunker``: the content-defined chunker's keyed gear table (``gear``), so chunk boundaries do not
  fingerprint known files;
- ``key check``: a public fingerprint of the key (``key_check``), recorded in the store when the key is
  made and pinned by every client, so drtool never adopts a key other than the store's;
- ``store auth``: an HMAC key (``mac``) that authenticates the store's key records, its config and the
  metadata of key slots.

The key also owns the associated data of everything it seals (``associated_data``): each sealed object is
bound to its kind, its store and its name, so objects cannot be swapped, renamed or moved between stores
without detection. The raw secret never leaves this object except wrapped into a key slot (``wrap``).

After ``drtool key rotate`` a store has key *generations*: the current key seals everything new, and holds
the retired ones (``retire``), which open only what they sealed before they were retired (``unseal``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import os
import secrets
import threading
from collections.abc import Callable, Collection, Sequence

import blake3
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from drtool.crypto.process_guard import protect_process
from drtool.errors import Unauthentic

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
SEAL_OVERHEAD = NONCE_BYTES + 16
# kinds of sealed objects (docs/store-format.md): part of every object's associated data
CHUNK, MANIFEST, LOCK, KEY_SLOT = "chunk", "manifest", "lock", "keyslot"
BLOB, PACK, INDEX, PART = "blob", "pack", "index", "part"  # format 2: a chunk in a pack, a pack's header, ...
KEYRING = "keyring"  # the retired keys a key generation holds (docs/store-format.md, "Key rotation")
# what a retired key may still open: content-addressed objects (re-hashed under the same key after opening)
# and locks; manifests and index objects only under the names the rotation listed (``RetiredKey.sealed``)
_RETIRED_KINDS = frozenset({CHUNK, BLOB, PACK, LOCK, MANIFEST, INDEX})
_LISTED_KINDS = frozenset({MANIFEST, INDEX})
KEY_CHECK_BYTES = 16
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
        raise Unauthentic(f"{what} is truncated ({len(blob)} bytes)", "run `drtool check --read-data`")
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except InvalidTag:
        raise Unauthentic(
            f"{what} failed authentication (corrupted, swapped or from another store)",
            "run `drtool check --read-data` to list every damaged object",
        ) from None


class MasterKey:
    """The master key of one store: its derived subkeys, and the raw secret kept only to wrap it into slots."""

    def __init__(self, secret: bytes, store_id: str) -> None:
        if len(secret) != MASTER_KEY_BYTES:
            raise ValueError("master key must be 32 bytes")
        protect_process()  # from now on this process holds a key: no core dumps, no ptrace by the user
        self._secret = secret
        self.store_id = store_id
        self._aead_key = hkdf(secret, b"drtool v1 aead")
        self._id_key = hkdf(secret, b"drtool v1 chunk ids")
        self._blake3_id_key = hkdf(secret, b"drtool v2 chunk ids blake3")
        self._auth_key = hkdf(secret, b"drtool v1 store auth")
        self.key_check = hkdf(secret, b"drtool v1 key check", KEY_CHECK_BYTES).hex()
        self.generation = 0  # set from the store's key records when the store is opened
        self.retired: tuple[RetiredKey, ...] = ()
        self.readable: frozenset[str] | None = None  # once retired: the manifests and indexes it sealed by then
        self._last_opener: dict[str, MasterKey] = {}  # per kind: the generation that opened the last object
        self._opener_lock = threading.Lock()
        self._gear: tuple[bytes, int] | None = None

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

    # --- what the key authenticates and derives besides sealed objects ------------------------------------

    def mac(self, purpose: str, data: bytes) -> str:
        """HMAC-SHA-256 of ``data`` under the store-auth subkey, bound to ``purpose`` (hex)."""
        return hmac.digest(self._auth_key, purpose.encode() + b"\n" + data, "sha256").hex()

    def verify_mac(self, purpose: str, data: bytes, mac: object) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(self.mac(purpose, data), mac)

    @property
    def chunker_seed(self) -> int:
        """The 32-bit gear-table seed of stores made before the keyed gear table (``gear``)."""
        return int.from_bytes(hkdf(self._secret, b"drtool v1 chunker seed", 4), "little")

    def gear(self) -> tuple[bytes, int]:
        """The keyed gear table, as pyfastcdc can take it: a secret permutation of the 256 byte values (the
        chunker reads ``GEAR[perm[b]]`` by translating its input) and a secret 63-bit seed XOR-ed into every
        entry (pyfastcdc shifts the seed left as an unsigned 64-bit number). pyfastcdc takes a seed, not a
        table; with the permutation the table is one of 256! x 2^63 instead of one of 2^32."""
        if self._gear is not None:
            return self._gear
        stream = hkdf(self._secret, b"drtool v1 keyed gear table", 8 + 2 * 1024)
        seed, pool = (int.from_bytes(stream[:8], "little") >> 1) or 1, memoryview(stream)[8:]
        table = list(range(256))
        draws = (int.from_bytes(pool[i : i + 2], "little") for i in range(0, len(pool), 2))
        for top in range(255, 0, -1):  # Fisher-Yates, each index drawn without bias by rejection
            limit = 65536 - 65536 % (top + 1)
            j = next(d for d in draws if d < limit) % (top + 1)
            table[top], table[j] = table[j], table[top]
        self._gear = bytes(table), seed
        return self._gear

    # --- key generations (docs/store-format.md, "Key rotation") -------------------------------------------

    def retire(self, retired: Sequence[RetiredKey], generation: int) -> None:
        """Hold the keys this one replaced, newest first, so objects they sealed can still be opened."""
        self.generation = generation
        self.retired = tuple(sorted(retired, key=lambda r: r.generation, reverse=True))

    def retired_after(self, sealed: frozenset[str]) -> None:
        """This key was retired when ``sealed`` were its manifests and index objects: it opens no other (they
        are a newer generation's, which this key cannot open: readers skip them instead of failing)."""
        self.readable = sealed

    def may_open(self, kind: str, name: str) -> bool:
        """Whether this key may hold ``name`` of ``kind``: false for a manifest or index object written after
        it was retired (a retired key's reader lists only what it sealed)."""
        return self.readable is None or kind not in _LISTED_KINDS or name in self.readable

    def secret_for_ring(self) -> bytes:
        """The raw secret, for sealing into the keyring of the key that replaces this one (and nowhere else)."""
        return self._secret

    def opener(self, kind: str, name: str, blob: bytes | bytearray | memoryview) -> tuple[bytes, MasterKey]:
        """Open an object and say which key generation sealed it: this key, or a retired one that may open
        it (``_RETIRED_KINDS``; a manifest or index only if it existed when that key was retired)."""
        aad = associated_data(kind, self.store_id, name)
        if not self.may_open(kind, name):
            raise Unauthentic(
                f"{kind} {self._shown(kind, name)} was written after this key was retired (a newer key generation "
                "sealed it, or a holder of this key)",
                "open the store with a credential of the current key",
            )
        if len(blob) < SEAL_OVERHEAD:
            what = f"{kind} {self._shown(kind, name)}"
            raise Unauthentic(f"{what} is truncated ({len(blob)} bytes)", "run `drtool check --read-data`")
        candidates = [self]
        if self.retired and kind in _RETIRED_KINDS:
            allowed = [r.key for r in self.retired if kind not in _LISTED_KINDS or name in r.sealed]
            last = self._last_opener.get(kind)
            candidates += sorted(allowed, key=lambda k: k is not last)  # the last one that worked first
        nonce, body = bytes(blob[:NONCE_BYTES]), blob[NONCE_BYTES:]
        for key in candidates:
            try:
                plain = AESGCM(key._aead_key).decrypt(nonce, body, aad)
            except InvalidTag:
                continue
            if key is not self:
                with self._opener_lock:
                    self._last_opener[kind] = key
            return plain, key
        late = [r for r in self.retired if kind in _LISTED_KINDS and name not in r.sealed]
        for r in late:
            with contextlib.suppress(InvalidTag):
                AESGCM(r.key._aead_key).decrypt(nonce, body, aad)
                raise Unauthentic(
                    f"{kind} {self._shown(kind, name)} is sealed with key generation {r.generation}, which was "
                    "retired before it was written: a holder of the old key wrote it",
                    "it is never used; remove it, and see docs/threat-model.md (key rotation)",
                )
        raise Unauthentic(
            f"{kind} {self._shown(kind, name)} failed authentication (corrupted, swapped or from another store)",
            "run `drtool check --read-data` to list every damaged object",
        )

    @staticmethod
    def _shown(kind: str, name: str) -> str:
        return name[: SHOWN[kind]] if kind in SHOWN else name

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
        if not self.retired and self.readable is None:
            aad = associated_data(kind, self.store_id, name)
            return unseal(self._aead_key, blob, aad, f"{kind} {self._shown(kind, name)}")
        return self.opener(kind, name, blob)[0]


@dataclasses.dataclass(frozen=True)
class RetiredKey:
    """A key generation that ``drtool key rotate`` replaced, as the current key holds it."""

    generation: int
    key: MasterKey
    sealed: Collection[str]  # manifests and index objects in the store when it was retired: all it may open
