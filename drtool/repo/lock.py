"""Store-level locks: backups hold shared locks, prune an exclusive one (docs/store-format.md §Locks).

Why locks at all: a backup deduplicates against chunks it saw at its start, and prune deletes chunks no
manifest names. Without mutual exclusion a prune could delete a chunk a running backup is about to
reference, and that backup's manifest would name a chunk that is gone.

Protocol (restic's, over any backend with create-if-absent and a consistent LIST): write your own lock
object, then list every lock; if one conflicts (an exclusive lock against anything, anything against an
exclusive lock) and is not stale, delete yours and retry with jitter until ``wait`` runs out. Whichever
of two racing writers lists second sees the other, so two conflicting locks are never both held.

A holder refreshes its lock (a background thread) long before it expires. A lock is stale when it expired
(its holder stopped refreshing: crashed, partitioned, paused) or when its holder ran on this host and that
process is gone. Stale locks do not block anyone; ``drtool unlock`` and prune delete them. A holder whose
lock disappeared (deleted as stale while it was paused) or could not be refreshed before it expired has
lost it: ``check`` raises and the backup is abandoned instead of publishing a manifest whose chunks a
concurrent prune may have removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import random
import socket
import threading
import time
from typing import Literal

from drtool.crypto.master import LOCK
from drtool.errors import DrtoolError, IntegrityError, NotFound, StoreUnavailable, Unauthentic
from drtool.repo import layout
from drtool.repo.repository import Repository

LOCK_VERSION = 1
DEFAULT_TTL = 30 * 60.0  # restic's value: a paused or partitioned holder has half an hour to come back
Kind = Literal["shared", "exclusive"]


class StoreLocked(StoreUnavailable):
    """Another holder's lock conflicts with the one asked for; waiting or `drtool unlock` may help."""


class LockLost(StoreUnavailable):
    """This process's lock expired or was removed while it worked; its result must not be published."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ts(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class LockInfo:
    """One lock object as read back from the store (``error`` set when it could not be read)."""

    id: str
    kind: Kind | None = None
    owner: str = ""
    host: str = ""
    pid: int = 0
    created: str = ""
    expires: str = ""
    error: str | None = None
    authentic: bool = True  # False: no key of the store sealed it, so no drtool holds it (planted, damaged)

    def to_json(self) -> dict[str, object]:
        fields = dataclasses.asdict(self).items()
        return {"version": LOCK_VERSION, **{k: v for k, v in fields if k not in ("error", "authentic")}}

    def stale(self, now: dt.datetime | None = None) -> bool:
        """Expired, or held by a process of this host that no longer exists. Unreadable locks are not stale."""
        if self.error is not None:
            return False
        if (now or _now()) > dt.datetime.fromisoformat(self.expires):
            return True
        return self.host == socket.gethostname() and not _pid_alive(self.pid)

    def conflicts_with(self, kind: Kind) -> bool:
        """Whether holding this lock forbids taking one of ``kind``; an unreadable lock only blocks exclusive
        (it could be a newer drtool's prune), one that does not authenticate blocks nothing."""
        if not self.authentic:
            return False
        if self.error is not None:
            return kind == "exclusive"
        return kind == "exclusive" or self.kind == "exclusive"

    def describe(self) -> str:
        if self.error is not None:
            return f"lock {self.id} (unreadable: {self.error})"
        return f"{self.kind} lock {self.id} held by {self.owner!r} on {self.host} pid {self.pid} since {self.created}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_lock(repo: Repository, lock_id: str) -> LockInfo:
    """One lock by id; NotFound when it is gone, ``error`` set when it does not decrypt or parse."""
    blob = repo.backend.get(layout.lock(lock_id))
    try:
        data = json.loads(repo.key.unseal(LOCK, lock_id, blob))
        if data.get("version") != LOCK_VERSION:
            raise IntegrityError(f"lock {lock_id} has unknown version {data.get('version')}")
        fields = {f.name for f in dataclasses.fields(LockInfo)} - {"error", "id", "authentic"}
        return LockInfo(id=lock_id, **{k: data[k] for k in fields})
    except Unauthentic as exc:
        return LockInfo(id=lock_id, error=exc.message, authentic=False)
    except (DrtoolError, ValueError, KeyError, TypeError) as exc:
        return LockInfo(id=lock_id, error=exc.message if isinstance(exc, DrtoolError) else str(exc))


def list_locks(repo: Repository) -> list[LockInfo]:
    """Every lock in the store (a lock deleted while we list is skipped); one that does not authenticate is
    listed, and named once in a warning (``Repository.skip``)."""
    out = []
    for name in repo.backend.list(layout.LOCKS):
        lock_id = layout.lock_id_of(name)
        if not lock_id:
            repo.skip(name, "not a lock name")
            continue
        try:
            info = read_lock(repo, lock_id)
        except NotFound:
            continue
        if not info.authentic:
            repo.skip(name, f"{info.error}; it blocks nothing")
        out.append(info)
    return sorted(out, key=lambda lock: lock.id)


def remove_stale_locks(repo: Repository, *, everything: bool = False) -> list[LockInfo]:
    """Delete stale locks (or, with ``everything``, every lock: only when no drtool runs). Returns them."""
    now = _now()
    gone = [lock for lock in list_locks(repo) if everything or lock.stale(now)]
    for lock in gone:
        repo.backend.delete(layout.lock(lock.id))
    return gone


class StoreLock:
    """A lock this process holds; use ``acquire`` to get one and as a context manager to release it."""

    def __init__(self, repo: Repository, info: LockInfo, ttl: float) -> None:
        self.repo = repo
        self.info = info
        self.ttl = ttl
        self._stop = threading.Event()
        self._lost: str | None = None
        self._expires = dt.datetime.fromisoformat(info.expires)
        self._thread = threading.Thread(target=self._refresh_loop, name=f"drtool-lock-{info.id}", daemon=True)

    @property
    def id(self) -> str:
        return self.info.id

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _write(self, info: LockInfo, *, exclusive: bool) -> None:
        blob = self.repo.key.seal(LOCK, info.id, json.dumps(info.to_json()).encode())
        self.repo.backend.put(layout.lock(info.id), blob, exclusive=exclusive)

    def refresh(self) -> None:
        """Push the expiry forward; a lock deleted by someone else is not re-created but marked lost."""
        if self._lost:
            return
        if not self.repo.backend.exists(layout.lock(self.id)):
            self._lost = "it was removed from the store (treated as stale by another process?)"
            return
        expires = _now() + dt.timedelta(seconds=self.ttl)
        self.info = dataclasses.replace(self.info, expires=_ts(expires))
        self._write(self.info, exclusive=False)
        self._expires = expires

    def _refresh_loop(self) -> None:
        interval = max(0.05, self.ttl / 6)
        while not self._stop.wait(interval):
            with contextlib.suppress(DrtoolError):  # the store may come back before the lock expires
                self.refresh()
            if self._lost:
                return
            if _now() > self._expires:
                self._lost = "it expired before it could be refreshed (store unreachable?)"
                return

    def check(self) -> None:
        """Raise LockLost if this lock can no longer be relied on (call before publishing anything)."""
        if self._lost is None and _now() > self._expires:
            self._lost = "it expired"
        if self._lost is None and not self.repo.backend.exists(layout.lock(self.id)):
            self._lost = "it was removed from the store"
        if self._lost is not None:
            raise LockLost(
                f"{self.info.kind} lock {self.id} on store {self.repo.backend.url} was lost: {self._lost}",
                "nothing was published; run again",
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.repo.backend.delete(layout.lock(self.id))


def acquire(
    repo: Repository,
    kind: Kind,
    owner: str,
    *,
    wait: float = 0.0,
    ttl: float = DEFAULT_TTL,
    retry_interval: float = 1.0,
) -> StoreLock:
    """Take a lock of ``kind``, retrying for up to ``wait`` seconds; raises StoreLocked naming the holder."""
    deadline = time.monotonic() + wait
    while True:
        created = _now()
        info = LockInfo(
            id=layout.new_lock_id(created),
            kind=kind,
            owner=owner,
            host=socket.gethostname(),
            pid=os.getpid(),
            created=_ts(created),
            expires=_ts(created + dt.timedelta(seconds=ttl)),
        )
        lock = StoreLock(repo, info, ttl)
        lock._write(info, exclusive=True)
        try:
            now = _now()
            blockers = [o for o in list_locks(repo) if o.id != info.id and o.conflicts_with(kind) and not o.stale(now)]
        except BaseException:
            repo.backend.delete(layout.lock(info.id))
            raise
        if not blockers:
            lock._thread.start()
            return lock
        repo.backend.delete(layout.lock(info.id))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise StoreLocked(
                f"store {repo.backend.url} is locked: {blockers[0].describe()}",
                "wait for it to finish; if its holder is gone for good, `drtool unlock` removes stale locks",
            )
        # jitter, so that two writers that saw each other do not retry in lockstep forever
        time.sleep(min(remaining, retry_interval * random.uniform(0.5, 1.5)))
