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
as before (docs/threat-model.md says what that leaves open), until ``drtool key owner-init`` writes
``keyring/owner``: from its generation on, the owner key it names decides as above.
"""

from __future__ import annotations

import dataclasses

from drtool.backends.backend import Backend
from drtool.crypto.owner import fingerprint
from drtool.repo.keyring import UPGRADE, Record, digest, owner_signed, read_records, read_upgrade, record_name


@dataclasses.dataclass
class TrustDecision:
    """The records that count, the generation they make current, and why (for `drtool key status`)."""

    owner: str | None  # the owner key's public half (None: a store without one)
    records: list[Record]  # the records that count, oldest first; every record in a store without an owner key
    ignored: list[str]  # one line per record that does not count, naming it and why
    upgrade: Record | None = None  # keyring/owner, when the owner key comes from it (drtool key owner-init)

    @property
    def chain(self) -> list[Record] | None:
        """The store's generations, oldest first, when the owner key decides them; None when a key must."""
        return self.records if self.owner else None

    def generation_of(self, key_check: str) -> int | None:
        """Which generation of the records that count ``key_check`` is (None: not one of them)."""
        return next((r["generation"] for r in self.chain or () if r.get("key_check") == key_check), None)

    def why(self) -> str:
        if not self.owner:
            return "the store records no owner key: its key records count as the key that opens them says"
        current, since = self.records[-1], (f" from generation {self.upgrade['generation']} on" if self.upgrade else "")
        return (
            f"generation {current['generation']} (key check {current['key_check']}) is the newest key record "
            f"signed by the store's owner key {fingerprint(self.owner)}{since}"
        )


def of_store(backend: Backend) -> TrustDecision:
    """The trust decision for the records ``backend`` holds now (problems with them left out: the open
    reports those, drtool/repo/unlock.py)."""
    return decide(read_records(backend)[0], read_upgrade(backend)[0])


def decide(records: list[Record], upgrade: Record | None = None) -> TrustDecision:
    """The trust decision for ``records`` (drtool/repo/keyring.py ``read_records``) and ``keyring/owner``
    (``read_upgrade``): the owner key of ``keyring/0000``, else of ``keyring/owner``, signs every generation
    after its own; the generations up to it count as the key that opens them says (establish)."""
    root = next((r for r in records if r["generation"] == 0), None)
    ignored: list[str] = []
    base = root if root is not None and isinstance(root.get("owner"), str) else None
    if base is not None and upgrade is not None:
        ignored.append(f"{UPGRADE} ignored: the store's first key record names its owner key")
        upgrade = None
    if base is None and upgrade is not None:
        named = (upgrade["generation"], upgrade.get("key_check"))
        base = next((r for r in records if (r["generation"], r["key_check"]) == named), None)
        if base is None:
            ignored.append(f"{UPGRADE} ignored: it names generation {named[0]} with a key check no record has")
            upgrade = None
    if base is None:
        return TrustDecision(None, records, ignored)
    owner = str((upgrade or base)["owner"])
    config = (upgrade or base).get("config_sha256")
    chain = [base]
    for record in sorted((r for r in records if r["generation"] > base["generation"]), key=_order):
        why = _not_next(record, chain, owner, config)
        if why is None:
            chain.append(record)
        else:
            ignored.append(f"key record {record_name(record['generation'], str(record['key_check']))} ignored: {why}")
    before = [r for r in records if r["generation"] < base["generation"]]
    return TrustDecision(owner, before + chain, ignored, upgrade)


def _order(record: Record) -> tuple[int, str]:
    return record["generation"], str(record["key_check"])


def _not_next(record: Record, chain: list[Record], owner: str, config: object) -> str | None:
    """Why ``record`` is not the generation after ``chain``'s last, or None when it is."""
    following = chain[-1]["generation"] + 1
    if not owner_signed(record, owner):
        return "it is not signed by the store's owner key (written with the master key alone: the CronJob's?)"
    if record["generation"] < following:
        return f"generation {record['generation']} already has an owner-signed record"
    if record["generation"] > following:
        return f"generation {following} has no owner-signed record"
    if record.get("previous_sha256") != digest(chain[-1]):
        return f"it does not follow the record of generation {following - 1}"
    if record.get("config_sha256") != config:
        return "it names another store config"
    return None
