"""What an operator presents to open a store: a passphrase, a key file, or recovery shares.

A credential may open more than one slot: anyone who can write ``keys/`` can plant a slot that a guessed
passphrase opens, or that the CronJob's own key file opens. So unlocking yields every key a credential
opens (``candidates``) and the store decides which one is its own (drtool/repo/trust.py).

A machine that keeps no pins between runs (a CronJob's pod) names the key it expects instead
(``Expected``: ``DRTOOL_EXPECT_KEY_CHECK`` and ``DRTOOL_EXPECT_KEY_GENERATION``): drtool then opens the store
with that key generation or not at all.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterator, Sequence

from drtool.crypto import slots
from drtool.crypto.master import MasterKey
from drtool.crypto.owner import OwnerKey
from drtool.errors import UsageError, WrongKey

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Opened:
    """A slot that opened with the credentials, the key it holds, and the key check the credential itself
    names (a version-2 key file or recovery share; None for a passphrase)."""

    slot: slots.KeySlot
    key: MasterKey
    vouched: str | None
    owner: OwnerKey | None = None  # the owner key, when an owner-class slot holds it


@dataclasses.dataclass(frozen=True)
class Expected:
    """The key a deployment expects the store to be opened with: its key check and generation."""

    key_check: str
    generation: int

    @classmethod
    def parse(cls, key_check: str, generation: str) -> Expected:
        """From the two settings' text; UsageError names what is wrong (a CronJob left with placeholders)."""
        if not re.fullmatch(r"[0-9a-f]{32}", key_check):
            raise UsageError(
                f"DRTOOL_EXPECT_KEY_CHECK {key_check!r} is not a key check (32 hex digits)",
                "set it to what `drtool key status` prints for the store",
            )
        if not generation.isdigit():
            raise UsageError(
                f"DRTOOL_EXPECT_KEY_GENERATION {generation!r} is not a generation number",
                "set it to what `drtool key status` prints for the store",
            )
        return cls(key_check, int(generation))


@dataclasses.dataclass(frozen=True)
class Credentials:
    passphrase: str | None = dataclasses.field(default=None, repr=False)
    keyfile_secret: bytes | None = dataclasses.field(default=None, repr=False)
    shares: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    keyfile_for: tuple[str, str] | None = None  # (store id, key check) a version-2 key file names
    expect: Expected | None = None  # the only key generation these credentials may open the store with

    @classmethod
    def of_keyfile(cls, keyfile: slots.KeyFile) -> Credentials:
        bound = (keyfile.store_id, keyfile.key_check) if keyfile.store_id and keyfile.key_check else None
        return cls(keyfile_secret=keyfile.secret, keyfile_for=bound)

    def describe(self) -> str:
        kinds = [
            k
            for k, v in (
                ("key file", self.keyfile_secret),
                ("recovery shares", self.shares),
                ("passphrase", self.passphrase),
            )
            if v
        ]
        return " or ".join(kinds) or "no credentials"

    def candidates(
        self, store_id: str, key_slots: Sequence[slots.KeySlot], first: str | None = None
    ) -> Iterator[Opened]:
        """Every slot of a matching kind that these credentials open, the cheap kinds first (a key file never
        waits on Argon2), and within a kind the slot ``first`` (the one that opened the store last time)."""
        if self.keyfile_for and self.keyfile_for[0] != store_id:
            raise WrongKey(
                f"the key file belongs to store {self.keyfile_for[0]}, not {store_id}", "give this store's key file"
            )
        attempts = (
            ("keyfile", self.keyfile_secret, slots.open_with_keyfile),
            ("recovery", self.shares, lambda s, sid, c: slots.open_with_shares(s, sid, list(c))),
            ("passphrase", self.passphrase, slots.open_with_passphrase),
        )
        for kind, credential, opener in attempts:
            if not credential:
                continue
            for slot in sorted((s for s in key_slots if s.kind == kind), key=lambda s: s.id != first):
                log.debug("trying key slot %s (%s) of store %s", slot.id, kind, store_id)
                unwrapped = opener(slot, store_id, credential)
                if unwrapped is not None:
                    log.debug("key slot %s (%s) opened", slot.id, kind)
                    vouched = self._vouched(kind, slot, store_id)
                    yield Opened(slot, unwrapped.master, vouched, unwrapped.owner)

    def _vouched(self, kind: str, slot: slots.KeySlot, store_id: str) -> str | None:
        if kind == "keyfile":
            return self.keyfile_for[1] if self.keyfile_for else None
        if kind == "recovery":
            checks = {s.key_check for s in slots.shares_for(slot, store_id, list(self.shares))}
            if len(checks) > 1:
                raise WrongKey(f"the recovery shares for slot {slot.id} name different keys", "use one set of shares")
            return checks.pop()
        return None

    def no_slot_opens(self, store_id: str, key_slots: Sequence[slots.KeySlot], ignored: Sequence[str]) -> WrongKey:
        """The error when no slot opened with these credentials (``ignored``: slots that opened a foreign key)."""
        if self.shares and not any(slots.shares_for(s, store_id, list(self.shares)) for s in key_slots):
            return WrongKey(
                "the recovery shares belong to another store or to a removed key slot",
                "use shares printed for this store (`drtool key list` shows its slots)",
            )
        also = f" (slot(s) {', '.join(ignored)} opened, but not with this store's key)" if ignored else ""
        return WrongKey(
            f"no key slot of store {store_id} opens with the given {self.describe()}{also}",
            "check DRTOOL_PASSPHRASE / DRTOOL_PASSPHRASE_FILE / DRTOOL_KEYFILE",
        )
