"""Fences: an owner-signed record that a backup set's old primary must no longer write (docs/standby.md).

`drtool failover` writes ``fences/<set>`` once it takes service away from a primary: the record is sealed
under the store's key (so it does not show set names or addresses) and signed with the store *owner's* key
(drtool/crypto/owner.py), which only an owner-class credential (the passphrase slot) holds. Every backup
session checks for it before publishing a manifest (``refuse_if_fenced``), and a standby stops following the
set's links stored after it. The backup CronJob opens the store with a key file: it holds the master key but
not the owner key, so it can neither write a fence nor a record that reads as one; a fence that does not
carry the owner's signature is passed over with a warning (a planted one must not stop backups).

What a fence cannot prevent (docs/threat-model.md, "Fences"): a store writer that may delete objects can
delete the record; backups then publish again, but a standby that saw the fence keeps it in its own state
and never applies their links.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from typing import TYPE_CHECKING

from drtool.crypto import owner as owner_key
from drtool.errors import DrtoolError, Fenced, NotFound, UsageError

if TYPE_CHECKING:
    from drtool.repo.repository import Repository

FENCES = "fences/"
KIND = "fence"  # the associated data's kind (drtool/crypto/master.py)
SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclasses.dataclass(frozen=True)
class Fence:
    """A set's fence: who wrote it (the owner key's fingerprint), when, and why."""

    backup_set: str
    written: str  # as the failover stated it (UTC, ISO 8601)
    reason: str
    primary: tuple[str, ...]  # the old primary's API endpoints, from the set's backups
    owner: str  # fingerprint of the owner key that signed it
    stored: dt.datetime | None = None  # when the store received it (its own clock)

    def to_json(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["primary"] = list(self.primary)
        out["stored"] = self.stored.isoformat() if self.stored else None  # full precision: links are judged by it
        return out


def object_name(backup_set: str) -> str:
    if not SET_NAME.match(backup_set):
        raise UsageError(f"{backup_set!r} is not a backup set name", "letters, digits, '.', '_' and '-'")
    return f"{FENCES}{backup_set}"


def write_fence(repo: Repository, backup_set: str, reason: str, primary: tuple[str, ...]) -> Fence:
    """Fence ``backup_set``: needs the owner key (a passphrase credential), refused otherwise."""
    if repo.owner is None or not repo.trust.owner_key:
        raise UsageError(
            "fencing a backup set needs the store owner's key, and these credentials do not hold it",
            "open the store with its passphrase (the owner-class slot), not the CronJob's key file",
        )
    written = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"set": backup_set, "written": written, "reason": reason, "primary": list(primary)}
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    record = {"body": body, "sig": repo.owner.sign(data)}
    name = object_name(backup_set)
    repo.backend.put(name, repo.key.seal(KIND, name, json.dumps(record).encode()))
    return read_fence(repo, backup_set) or _unreadable(name)


def _unreadable(name: str) -> Fence:
    raise DrtoolError(f"the fence {name} just written does not read back", "check the store's health")


def lift_fence(repo: Repository, backup_set: str) -> bool:
    """Remove a set's fence (failback, once the old site is rebuilt): owner credentials only. False: none."""
    if repo.owner is None:
        raise UsageError("lifting a fence needs the store owner's key", "open the store with its passphrase")
    name = object_name(backup_set)
    if not repo.backend.exists(name):
        return False
    repo.backend.delete(name)
    return True


def read_fence(repo: Repository, backup_set: str) -> Fence | None:
    """The set's fence, if one is there and the owner signed it; a record that fails either check is passed
    over with a warning (``Repository.skip``), so a planted one cannot stop a set's backups."""
    name = object_name(backup_set)
    try:
        blob, stored = repo.backend.get_timed(name)
    except NotFound:
        return None
    try:
        record = json.loads(repo.key.unseal(KIND, name, blob))
        body = record["body"]
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        signed = bool(repo.trust.owner_key) and owner_key.verify(repo.trust.owner_key, data, record.get("sig"))
    except (DrtoolError, ValueError, KeyError, TypeError) as exc:
        repo.skip(name, f"not a fence this store wrote ({getattr(exc, 'message', exc)})")
        return None
    if not signed or body.get("set") != backup_set:
        repo.skip(name, "a fence record without the store owner's signature (planted?)")
        return None
    return Fence(
        backup_set,
        str(body["written"]),
        str(body.get("reason", "")),
        tuple(str(p) for p in body.get("primary") or ()),
        owner_key.fingerprint(repo.trust.owner_key or ""),
        stored,
    )


def refuse_if_fenced(repo: Repository, backup_set: str | None) -> None:
    """Raise ``Fenced`` when ``backup_set`` has a fence: a fenced primary publishes nothing more."""
    if not backup_set or not SET_NAME.match(backup_set):
        return
    fence = read_fence(repo, backup_set)
    if fence is not None:
        raise Fenced(
            f"backup set {backup_set} is fenced since {fence.written} ({fence.reason}): this site is no longer "
            "its primary, nothing was published",
            "after a failback, the owner lifts the fence (`drtool failback`); docs/standby.md",
        )
