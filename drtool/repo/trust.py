"""Which key records count: the trust decision of opening a store, made once, before any key is used.

A store with an owner key (drtool/crypto/owner.py) names it in its first key record, ``keyring/0000``. From
there the store's key generations are a chain that needs no master key to follow: generation ``k`` is the
one record of that generation that the owner key signed and that names the hash of generation ``k - 1``'s
record and the store's config hash. Every other record under ``keyring/`` is ignored and named (one line
each): a holder of the master key alone (the CronJob's key file) can write records that authenticate
under the master key, but cannot sign one, so it cannot make a generation the store's.

Then drtool/repo/unlock.py opens a slot with the credentials, and uses the key it holds only if its key
check is one of this chain's. A store made before owner keys has no such chain: every record is passed on,
and the key that opens decides (its HMAC chain, drtool/repo/keyring.py ``establish``), trust on first use
as before (docs/threat-model.md says what that leaves open).
"""

from __future__ import annotations

import dataclasses

from drtool.crypto.owner import fingerprint
from drtool.repo.keyring import Record, digest, owner_signed, record_name


@dataclasses.dataclass
class TrustDecision:
    """The records that count, the generation they make current, and why (for `drtool key status`)."""

    owner: str | None  # the owner key's public half (None: a store made before owner keys)
    records: list[Record]  # the owner-signed chain, oldest first; every record in a store without an owner key
    ignored: list[str]  # one line per record that does not count, naming it and why

    @property
    def chain(self) -> list[Record] | None:
        """The store's generations, oldest first, when the owner key decides them; None when a key must."""
        return self.records if self.owner else None

    def generation_of(self, key_check: str) -> int | None:
        """Which generation of the owner-signed chain ``key_check`` is (None: not one of them)."""
        return next((r["generation"] for r in self.chain or () if r.get("key_check") == key_check), None)

    def why(self) -> str:
        if not self.owner:
            return "the store records no owner key: its key records count as the key that opens them says"
        current = self.records[-1]
        return (
            f"generation {current['generation']} (key check {current['key_check']}) is the newest key record "
            f"signed by the store's owner key {fingerprint(self.owner)}"
        )


def decide(records: list[Record]) -> TrustDecision:
    """The trust decision for ``records`` (drtool/repo/keyring.py ``read_records``)."""
    root = next((r for r in records if r["generation"] == 0), None)
    owner = root.get("owner") if root else None
    if root is None or not isinstance(owner, str):
        return TrustDecision(None, records, [])
    chain, ignored = [root], []
    for record in sorted((r for r in records if r is not root), key=lambda r: (r["generation"], r["key_check"])):
        why = _not_next(record, chain, owner, root)
        if why is None:
            chain.append(record)
        else:
            ignored.append(f"key record {record_name(record['generation'], str(record['key_check']))} ignored: {why}")
    return TrustDecision(owner, chain, ignored)


def _not_next(record: Record, chain: list[Record], owner: str, root: Record) -> str | None:
    """Why ``record`` is not the generation after ``chain``'s last, or None when it is."""
    if not owner_signed(record, owner):
        return "it is not signed by the store's owner key (written with the master key alone: the CronJob's?)"
    if record["generation"] < len(chain):
        return f"generation {record['generation']} already has an owner-signed record"
    if record["generation"] > len(chain):
        return f"generation {len(chain)} has no owner-signed record"
    if record.get("previous_sha256") != digest(chain[-1]):
        return f"it does not follow the record of generation {len(chain) - 1}"
    if record.get("config_sha256") != root.get("config_sha256"):
        return "it names another store config"
    return None
