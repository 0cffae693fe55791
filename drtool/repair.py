"""`drtool repair index`: rebuild a format-2 store's index from its packs' own headers (restic's
`repair index`, with drtool's sealing).

Why: backups and restores read the index before any chunk, and anyone who can write the store can put an
object under ``index/``. Readers skip index objects that do not authenticate (``pack_index.load``), but a
genuine index object that was lost or damaged leaves chunks that no index names: backups store them again,
and a restore that needs them fails. Every pack is self-describing (its sealed header lists its blobs), so
the index can always be rebuilt from the packs whose header authenticates: a damaged or planted index is
never a dead end.

Steps, under the store's exclusive lock (no backup or prune runs meanwhile):

1. read the header of every pack; one that does not authenticate is skipped by name, and what an index
   object in use says of it is kept (its blobs authenticate on their own when read);
2. write new index objects listing every blob of every readable pack;
3. write a marker superseding every index object that was there before (genuine, damaged or planted): from
   then on readers ignore them, also those that Object Lock keeps in the store for years;
4. delete the superseded objects (and earlier markers) the store lets go; those under retention stay.

A crash before step 3 leaves index objects that duplicate what the old ones said (harmless: readers take
the union); from step 3 on, the new objects are the index.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from drtool.errors import DrtoolError, IntegrityError, NotFound, UsageError
from drtool.prune import object_lock_enabled
from drtool.repo import layout, pack_index
from drtool.repo.lock import acquire
from drtool.repo.pack_index import PackIndex, Shipped
from drtool.repo.packed import PackedStore
from drtool.repo.repository import Repository
from drtool.repo.workers import DEFAULT_WORKERS
from drtool.repo.writer import DEFAULT_LOCK_WAIT


@dataclasses.dataclass
class RepairReport:
    packs_read: int = 0
    blobs_indexed: int = 0
    written: list[str] = dataclasses.field(default_factory=list)  # new index objects
    superseded: list[str] = dataclasses.field(default_factory=list)  # index objects readers now ignore
    marker: str | None = None
    deleted: list[str] = dataclasses.field(default_factory=list)
    kept: dict[str, str] = dataclasses.field(default_factory=dict)  # superseded, not deletable (Object Lock): why
    unreadable_packs: dict[str, str] = dataclasses.field(default_factory=dict)  # pack -> why its header failed

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def repair_index(
    repo: Repository, *, lock_wait: float = DEFAULT_LOCK_WAIT, workers: int = DEFAULT_WORKERS
) -> RepairReport:
    """Rebuild the index from the packs' headers and supersede every index object there was (module doc)."""
    store = repo.chunks
    if not isinstance(store, PackedStore):
        raise UsageError(
            f"store {repo.backend.url} is format 1 (a chunk per object): it has no index to repair",
            "`drtool check` lists missing and damaged chunks",
        )
    repo.require_current("repair the index")
    report = RepairReport()
    with acquire(repo, "exclusive", "repair index", wait=lock_wait) as lock:
        before = sorted(repo.backend.list(layout.INDEX))
        in_use, _ = store.load()
        shipped = _read_headers(store, sorted(store.pack_ids()), report, workers)
        kept = _rows_of(in_use, set(report.unreadable_packs))
        index = PackIndex.merge([pack_index.entries_of(shipped), kept])
        report.packs_read, report.blobs_indexed = len(shipped), len(index)
        lock.check()
        report.written = pack_index.write(repo.backend, repo.key, index.packs, index.entries)
        repo.backend.sync()
        report.superseded = [n for n in before if layout.index_id_of(n)]
        lock.check()
        ids = [layout.index_id_of(n) or "" for n in report.superseded]
        report.marker = pack_index.supersede(repo.backend, repo.key, ids)
        _delete(repo, before, report)
    store.invalidate()
    return report


def _read_headers(store: PackedStore, pack_ids: list[str], report: RepairReport, workers: int) -> list[Shipped]:
    def read(pack_id: str) -> Shipped | None:
        try:
            size, entries = store.read_header(pack_id)
        except NotFound:
            return None  # gone since the listing (no prune runs: the store was damaged meanwhile)
        except IntegrityError as exc:
            report.unreadable_packs[pack_id] = exc.message
            store.repo.skip(layout.pack(pack_id), exc.message)
            return None
        return pack_id, size, entries

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-repair") as pool:
        return [s for s in pool.map(read, pack_ids) if s is not None]


def _rows_of(index: PackIndex, pack_ids: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """What ``index`` lists of ``pack_ids``, as a table (its packs, those packs' entries)."""
    numbers = [n for n in range(len(index.packs)) if index.pack_id(n) in pack_ids]
    return index.packs, index.entries[np.isin(index.entries["pack"], numbers)]


def _delete(repo: Repository, names: list[str], report: RepairReport) -> None:
    """Delete the superseded objects, keeping those the store holds (Object Lock, or credentials that may not
    delete): they are ignored from now on, so keeping them costs storage only."""
    now = dt.datetime.now(dt.UTC)
    status = repo.backend.lock_status if object_lock_enabled(repo.backend) else None  # type: ignore[attr-defined]
    for name in names:
        try:
            held = status(name, now) if status else None
            if held:
                report.kept[name] = f"Object Lock: {held}"
                continue
            repo.backend.delete(name)
        except DrtoolError as exc:
            report.kept[name] = f"not deleted: {exc.message}"
            continue
        report.deleted.append(name)
