"""Prune's sweep in a format-2 store: delete dead packs, repack mostly-dead and small ones, rewrite the index.

Order (each step's objects exist before the next step removes anything, so a crash at any point leaves
every index entry naming a pack that exists, and every referenced chunk indexed):
1. new packs with the live blobs of the packs to repack (sealed blobs are copied as they are: no
   decryption, and they keep authenticating, since a blob is bound to its chunk id, not to its pack);
2. new index objects listing every live blob: of kept packs and of the new packs;
3. the old index objects are deleted; 4. the dead and the repacked packs are deleted.

Memory is flat in the store's size beyond the index itself (49 bytes per chunk) and the mark set (32 bytes
per referenced chunk): packs are classified with vectorised numpy, and at most ``workers`` packs' live
blobs are in memory while repacking.

Object Lock: a locked pack is never repacked (copying would free nothing) and never deleted; a locked index
object cannot be deleted, so the packs it names are kept whole. Both are reported, never errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from drtool.crypto.master import INDEX
from drtool.repo import layout, pack_index
from drtool.repo.pack import BlobEntry, PackBuilder
from drtool.repo.pack_index import PackIndex, Shipped, hex_ids
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
    live_bytes = np.bincount(numbers, weights=entries["sealed"] * live, minlength=len(index.packs))
    live_count = np.bincount(numbers, weights=live, minlength=len(index.packs))
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
    result.delete += sorted(listed - index.pack_ids() - pinned)  # uploaded by a killed backup, never indexed
    dead = entries["id"][~live]
    result.dead_chunks = len(np.setdiff1d(np.unique(dead), entries["id"][live]))
    return result


def repack(
    store: PackedStore, index: PackIndex, packs: list[str], live: np.ndarray, target: int, workers: int
) -> list[Shipped]:
    """Copy the live blobs of ``packs`` into new packs; returns what was written."""
    rows_by_pack = dict(index.by_pack())
    live_ids = set(hex_ids(index.entries[live]))
    written: list[Shipped] = []
    builder = PackBuilder()

    def live_blobs(pack_id: str) -> list[tuple[BlobEntry, bytes]]:
        rows = rows_by_pack[pack_id]
        blobs = [
            BlobEntry(cid, int(r["codec"]), int(r["offset"]), int(r["sealed"]), int(r["plain"]))
            for r, cid in zip(rows, hex_ids(rows), strict=True)
            if cid in live_ids
        ]
        if not blobs:
            return []
        start, end = blobs[0].offset, blobs[-1].offset + blobs[-1].sealed_length
        data = store.repo.backend.get_range(layout.pack(pack_id), start, end - start)
        return [(b, data[b.offset - start : b.offset - start + b.sealed_length]) for b in blobs]

    def ship(pack: PackBuilder) -> None:
        pack_id = layout.new_pack_id()
        data = pack.finish(store.repo.key, pack_id)
        store.repo.backend.put(layout.pack(pack_id), data, write_once=True)
        written.append((pack_id, len(data), pack.entries))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-repack") as pool:
        for start in range(0, len(packs), workers):  # at most ``workers`` packs' blobs in memory
            for blobs in pool.map(live_blobs, packs[start : start + workers]):
                for blob, sealed in blobs:
                    if blob.chunk_id in live_ids:
                        live_ids.discard(blob.chunk_id)  # a chunk in two old packs is copied once
                        builder.add(blob.chunk_id, blob.codec, blob.plain_length, sealed)
                if len(builder) >= target:
                    ship(builder)
                    builder = PackBuilder()
        if builder.entries:
            ship(builder)
    store.repo.backend.sync()
    return written


def new_index(
    index: PackIndex, sweep: SweepPlan, written: list[Shipped], pinned: set[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The index after the sweep: live blobs of kept packs (every blob of pinned ones) and the new packs."""
    gone = {*sweep.delete, *sweep.repack}
    pack_ids = np.array([index.pack_id(n) for n in range(len(index.packs))])
    keep_pack = ~np.isin(pack_ids, list(gone)) if gone else np.ones(len(pack_ids), dtype=bool)
    pinned_pack = np.isin(pack_ids, list(pinned)) if pinned else np.zeros(len(pack_ids), dtype=bool)
    numbers = index.entries["pack"]
    rows = index.entries[keep_pack[numbers] & (sweep.live | pinned_pack[numbers])]
    new_packs, new_rows = pack_index.entries_of(written)
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
    index, index_names = pack_index.load(store.repo.backend, store.repo.key)
    listed = store.pack_ids()
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
    if dry_run or not (sweep_plan.delete or sweep_plan.repack or sweep_plan.dead_chunks):
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
    figures["packs_written"] = len(written)
    return figures


def _packs_named(store: PackedStore, index_ids: list[str]) -> set[str]:
    named: set[str] = set()
    for index_id in index_ids:
        blob = store.repo.backend.get(layout.index(index_id))
        packs, _ = pack_index.decode(store.repo.key.unseal(INDEX, index_id, blob), f"index {index_id}")
        named |= {packs["id"][n : n + 1].tobytes().hex() for n in range(len(packs))}
    return named
