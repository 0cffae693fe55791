"""What an operator presents to open a store: a passphrase, a key file, or recovery shares."""

from __future__ import annotations

import dataclasses
import logging

from drtool.crypto import slots
from drtool.crypto.master import MasterKey
from drtool.errors import WrongKey

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Credentials:
    passphrase: str | None = dataclasses.field(default=None, repr=False)
    keyfile_secret: bytes | None = dataclasses.field(default=None, repr=False)
    shares: tuple[str, ...] = dataclasses.field(default=(), repr=False)

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

    def unlock(self, store_id: str, key_slots: list[slots.KeySlot]) -> tuple[MasterKey, slots.KeySlot]:
        """Try every slot of a matching kind; the cheap kinds first so a key file never waits on Argon2."""
        attempts = (
            ("keyfile", self.keyfile_secret, slots.open_with_keyfile),
            ("recovery", self.shares, lambda s, sid, c: slots.open_with_shares(s, sid, list(c))),
            ("passphrase", self.passphrase, slots.open_with_passphrase),
        )
        tried = False
        for kind, credential, opener in attempts:
            if not credential:
                continue
            for slot in (s for s in key_slots if s.kind == kind):
                tried = True
                log.debug("trying key slot %s (%s) of store %s", slot.id, kind, store_id)
                master = opener(slot, store_id, credential)
                if master is not None:
                    log.debug("key slot %s (%s) opened the store", slot.id, kind)
                    return master, slot
        if self.shares and not tried:
            raise WrongKey(
                "the recovery shares belong to another store or to a removed key slot",
                "use shares printed for this store (`drtool key list` shows its slots)",
            )
        raise WrongKey(
            f"no key slot of store {store_id} opens with the given {self.describe()}",
            "check DRTOOL_PASSPHRASE / DRTOOL_PASSPHRASE_FILE / DRTOOL_KEYFILE",
        )
