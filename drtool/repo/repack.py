"""Prune's sweep in a format-2 store: delete dead packs, repack mostly-dead and small ones, rewrite the index.

Order (each step's objects exist before the next step removes anything, so a crash at any point leaves
every index entry naming a pack that exists, and every referenced chunk indexed):
1. new packs with the live blobs of the packs to repack (sealed blobs are copied as they are: no
   decryption, and they keep authenticating, since a blob is bound to its chunk id, not to its pack);
2. new index objects listing every live blob: of kept packs and of the new packs;
3. the old index objects are deleted; 4. the dead and the repacked packs are deleted.
Packs no index object in use names are first indexed from their own headers (``PackedStore.adopt``): an
index object that does not authenticate is skipped, and the packs it named must not look like garbage.

Memory grows with the store only by numpy arrays: the index (49 bytes per chunk), the mark set (32 bytes per
referenced chunk) and the new index; packs are classified and the blobs to copy chosen with vectorised
numpy (no Python object per chunk: a set of live ids cost 150 bytes per chunk), and at most ``workers``
packs' live blobs are in memory while repacking (docs/performance.md, "Prune at 1 million chunks").

Object Lock: a locked pack is never repacked (copying would free nothing) and never deleted; a locked index
object cannot be deleted, so the packs it names are kept whole. Both are reported, never errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from drtool.crypto.master import INDEX, SEAL_OVERHEAD
from drtool.repo import layout, pack_index
from drtool.repo.pack import HEADER_ENTRY, TRAILER, PackBuilder
from drtool.repo.pack_index import PackIndex, hex_ids
from drtool.repo.packed import PackedStore

MAX_UNUSED = 0.25  # repack a pack once a quarter of its bytes is dead


@dataclasses.dataclass
class SweepPlan:
    delete: list[str] = dataclasses.field(default_factory=list)  # no live blob (and orphans no index names)
    repack: list[str] = dataclasses.field(default_factory=list)
    dead_chunks: int = 0
    live: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=bool))  # per index entry


def live_mask(index: PackIndex, referenced: np.ndarray) -> np.ndarray:
    """Per index entry: whether a kept backup references its chunk (``referenced`` sorted, unique, S32)."""
    ids = index.entries["id"]
    if not len(referenced):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(referenced, ids), len(referenced) - 1)
    return referenced[at] == ids


def plan(index: PackIndex, listed: set[str], referenced: np.ndarray, target: int, pinned: set[str]) -> SweepPlan:
    """Which packs to delete and which to repack; ``pinned`` packs are kept whole."""
    live = live_mask(index, referenced)
    entries = index.entries
    numbers = entries["pack"].astype(np.int64)
    live_count = np.bincount(numbers, weights=live, minlength=len(index.packs))
    # a live blob's header entry is live too: with 1 KiB chunks it is 4 % of a pack, with 64-byte ones 30 %,
    # and counting it as dead made every prune repack every pack of such a store
    blob_bytes = np.bincount(numbers, weights=entries["sealed"] * live, minlength=len(index.packs))
    live_bytes = blob_bytes + HEADER_ENTRY.size * live_count + SEAL_OVERHEAD + TRAILER.size
    result = SweepPlan(live=live)
    small = []
    for n in range(len(index.packs)):
        pack_id, size = index.pack_id(n), int(index.packs["size"][n])
        if pack_id in pinned or pack_id not in listed:
            continue  # a missing pack is `check`'s finding; its entries stay as evidence
        if live_count[n] == 0:
            result.delete.append(pack_id)
        elif size - live_bytes[n] >= MAX_UNUSED * size:
            result.repack.append(pack_id)
        elif size < target // 4:
            small.append(pack_id)
    if len(small) > 1:
        result.repack += small  # small packs (many small backups) are joined into full ones
    result.delete += sorted(listed - index.pack_ids() - pinned)  # indexed by nothing, their header unreadable
    result.dead_chunks = dead_chunks(entries["id"], live)
    return result


def copied_rows(index: PackIndex, packs: list[str], live: np.ndarray) -> np.ndarray:
    """The index rows whose blobs ``repack`` copies: the live blobs of ``packs``, one per chunk (a chunk in
    two of them is copied once), sorted by pack and offset. Vectorised: no Python object per chunk."""
    wanted = np.isin(index.packs["id"], np.array([bytes.fromhex(p) for p in packs], dtype="S16"))
    at = np.flatnonzero(live & wanted[index.entries["pack"]])
    ids = index.entries["id"][at]  # sorted by id: a chunk listed twice has adjacent rows
    first = np.ones(len(at), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    rows = index.entries[at[first]]
    return rows[np.lexsort((rows["offset"], rows["pack"]))]


def dead_chunks(ids: np.ndarray, live: np.ndarray) -> int:
    """How many distinct chunks have no live entry; ``ids`` sorted (a chunk listed twice has adjacent rows).
    One pass over runs of equal ids: no sort, no set of a million ids."""
    if not len(ids):
        return 0
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    return int(np.count_nonzero(np.logical_or.reduceat(live, starts) == 0))


def repack(
    store: PackedStore, index: PackIndex, packs: list[str], live: np.ndarray, target: int, workers: int
) -> tuple[np.ndarray, np.ndarray]:
    """Copy the live blobs of ``packs`` into new packs; returns the new packs and their blobs as index tables.

    Memory: the blobs of at most ``workers`` old packs and one new pack, and 49 bytes per copied blob."""
    rows = copied_rows(index, packs, live)
    numbers = rows["pack"]
    groups = np.split(rows, np.flatnonzero(numbers[1:] != numbers[:-1]) + 1) if len(rows) else []  # one per pack
    new_packs: list[np.ndarray] = []
    new_rows: list[np.ndarray] = []
    capacity = target + store.repo.config.chunker.max_size + SEAL_OVERHEAD  # a full pack and one more blob
    builder = PackBuilder(capacity)

    def fetch(group: np.ndarray) -> tuple[np.ndarray, memoryview]:
        """One old pack's live blobs, read with one ranged GET from the first to the last."""
        start = int(group["offset"][0])
        end = int(group["offset"][-1]) + int(group["sealed"][-1])
        name = layout.pack(index.pack_id(int(group["pack"][0])))
        return group, memoryview(store.repo.backend.get_range(name, start, end - start))

    def ship(pack: PackBuilder) -> None:
        pack_id = layout.new_pack_id()
        data = pack.finish(store.repo.key, pack_id)
        store.repo.backend.put(layout.pack(pack_id), data, write_once=True)
        table, blobs = pack_index.entries_of([(pack_id, len(data), pack.entries)])
        blobs["pack"] = len(new_packs)
        new_packs.append(table)
        new_rows.append(blobs)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-repack") as pool:
        for start in range(0, len(groups), workers):  # at most ``workers`` packs' blobs in memory
            for group, data in pool.map(fetch, groups[start : start + workers]):
                offsets = (group["offset"] - group["offset"][0]).tolist()  # columns as lists: no numpy scalars
                columns = (group["codec"].tolist(), group["plain"].tolist(), offsets, group["sealed"].tolist())
                for chunk_id, codec, plain, offset, sealed in zip(hex_ids(group), *columns, strict=True):
                    builder.add(chunk_id, codec, plain, data[offset : offset + sealed])
                    if len(builder) >= target:
                        ship(builder)
                        builder = PackBuilder(capacity)
        if builder.entries:
            ship(builder)
    store.repo.backend.sync()
    empty = np.zeros(0, dtype=pack_index.ENTRY)
    return np.concatenate([np.zeros(0, dtype=pack_index.PACK), *new_packs]), np.concatenate([empty, *new_rows])


def new_index(
    index: PackIndex, sweep: SweepPlan, written: tuple[np.ndarray, np.ndarray], pinned: set[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The index after the sweep: live blobs of kept packs (every blob of pinned ones) and the new packs."""
    gone = {*sweep.delete, *sweep.repack}
    pack_ids = np.array([index.pack_id(n) for n in range(len(index.packs))])
    keep_pack = ~np.isin(pack_ids, list(gone)) if gone else np.ones(len(pack_ids), dtype=bool)
    pinned_pack = np.isin(pack_ids, list(pinned)) if pinned else np.zeros(len(pack_ids), dtype=bool)
    numbers = index.entries["pack"]
    rows = index.entries[keep_pack[numbers] & (sweep.live | pinned_pack[numbers])]
    new_packs, new_rows = written
    new_rows = new_rows.copy()
    new_rows["pack"] += len(index.packs)
    return np.concatenate([index.packs, new_packs]), np.concatenate([rows, new_rows])


def sweep(
    store: PackedStore,
    referenced: np.ndarray,
    *,
    dry_run: bool,
    workers: int,
    lock_status: Callable[[str], str | None] | None,
    delete: Callable[[list[str]], list[str]],
    check_lock: Callable[[], None],
) -> dict[str, object]:
    """Run prune's sweep; returns the figures for its report. ``lock_status`` is None without Object Lock."""
    index, index_names = store.load()
    listed = store.pack_ids()
    # packs no index names are read before anything is deleted: a killed backup's, or those of an index object
    # that was lost or does not authenticate (skipped by ``load``), which may hold what backups need
    adopted = store.adopt(sorted(listed - index.pack_ids()))
    if adopted:
        index = PackIndex.merge([(index.packs, index.entries), pack_index.entries_of(adopted)])
    target = store.repo.config.packs.target_size if store.repo.config.packs else 16 << 20
    locked: dict[str, str] = {}
    pinned: set[str] = set()
    if lock_status is not None:
        for name in index_names:
            if held := lock_status(name):
                locked[name] = held
        if locked:
            still = [layout.index_id_of(n) for n in locked]
            pinned = _packs_named(store, [n for n in still if n])
    sweep_plan = plan(index, listed, referenced, target, pinned)
    if lock_status is not None:
        for pack_id in [*sweep_plan.delete, *sweep_plan.repack]:
            if held := lock_status(layout.pack(pack_id)):
                locked[layout.pack(pack_id)] = held
                pinned.add(pack_id)
        if pinned:
            sweep_plan = plan(index, listed, referenced, target, pinned)
    figures: dict[str, object] = {
        "packs_present": len(listed),
        "packs_deleted": len(sweep_plan.delete),
        "packs_repacked": len(sweep_plan.repack),
        "chunks_deleted": sweep_plan.dead_chunks,
        "locked_objects": locked,
    }
    if dry_run or not (sweep_plan.delete or sweep_plan.repack or sweep_plan.dead_chunks or adopted):
        figures["packs_written"] = 0
        return figures
    check_lock()
    written = repack(store, index, sweep_plan.repack, sweep_plan.live, target, workers)
    packs, rows = new_index(index, sweep_plan, written, pinned)
    check_lock()
    pack_index.write(store.repo.backend, store.repo.key, packs, rows)
    store.repo.backend.sync()
    check_lock()
    delete([n for n in index_names if n not in locked])
    delete([layout.pack(p) for p in [*sweep_plan.delete, *sweep_plan.repack]])
    figures["packs_written"] = len(written[0])
    return figures


def _packs_named(store: PackedStore, index_ids: list[str]) -> set[str]:
    named: set[str] = set()
    for index_id in index_ids:
        blob = store.repo.backend.get(layout.index(index_id))
        packs, _ = pack_index.decode(store.repo.key.unseal(INDEX, index_id, blob), f"index {index_id}")
        named |= {packs["id"][n : n + 1].tobytes().hex() for n in range(len(packs))}
    return named
