"""Prune's sweep in a format-2 store: delete dead packs, repack mostly-dead and small ones, rewrite the index.

Order (each step's objects exist before the next step removes anything, so a crash at any point leaves
every index entry naming a pack that exists, and every referenced chunk indexed):
1. new packs with the live blobs of the packs to repack (sealed blobs are copied as they are: no
   decryption, and they keep authenticating, since a blob is bound to its chunk id, not to its pack);
2. new index objects listing every live blob: of kept packs and of the new packs;
3. the old index objects are deleted; 4. the dead and the repacked packs are deleted.
Packs no index object in use names are first indexed from their own headers (``PackedStore.adopt``): an
index object that does not authenticate is skipped, and the packs it named must not look like garbage.

Memory does not grow with the store: the index and the mark set are spilled to local disk in 256 parts by
chunk id (``drtool.repo.spill``) and joined one part at a time, twice: once to count each pack's live blobs
and bytes, once to write the new index and pick the blobs to copy; per pack prune holds a few numbers. What
does grow is what this prune rewrites: 49 bytes per blob it copies, and the blobs of at most ``workers``
packs while repacking (docs/performance.md, "Prune at 1 million chunks").

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
from drtool.repo.pack_index import hex_ids, unique_ids
from drtool.repo.packed import PackedStore
from drtool.repo.spill import PARTS, Spill

MAX_UNUSED = 0.25  # repack a pack once a quarter of its bytes is dead


@dataclasses.dataclass
class SweepPlan:
    delete: list[str] = dataclasses.field(default_factory=list)  # no live blob (and orphans no index names)
    repack: list[str] = dataclasses.field(default_factory=list)
    dead_chunks: int = 0


@dataclasses.dataclass
class Tally:
    """The first join's figures: per pack (numbered as in the packs table), live blobs and their bytes."""

    live_count: np.ndarray
    blob_bytes: np.ndarray
    dead_chunks: int = 0
    referenced: int = 0  # distinct chunks the kept backups name


def live_mask(ids: np.ndarray, referenced: np.ndarray) -> np.ndarray:
    """Per id: whether a kept backup references it (``referenced`` sorted, unique, S32)."""
    if not len(referenced):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(referenced, ids), len(referenced) - 1)
    return referenced[at] == ids


def joined(entries: Spill, marks: Spill, part: int) -> tuple[np.ndarray, np.ndarray, int]:
    """One part's index rows sorted by id, whether each is live, and how many distinct chunks are marked."""
    rows = entries.part(part)
    rows = rows[np.argsort(rows["id"], kind="stable")]
    marked = unique_ids(marks.part(part))
    return rows, live_mask(rows["id"], marked), len(marked)


def tally(entries: Spill, marks: Spill, packs: int) -> Tally:
    """Every part joined once: each pack's live blobs and their bytes, dead and referenced chunks."""
    out = Tally(np.zeros(packs), np.zeros(packs))
    for part in range(PARTS):
        rows, live, marked = joined(entries, marks, part)
        numbers = rows["pack"].astype(np.int64)
        out.live_count += np.bincount(numbers, weights=live, minlength=packs)
        out.blob_bytes += np.bincount(numbers, weights=rows["sealed"] * live, minlength=packs)
        out.dead_chunks += dead_chunks(rows["id"], live)
        out.referenced += marked
    return out


def plan(packs: np.ndarray, figures: Tally, listed: set[str], target: int, pinned: set[str]) -> SweepPlan:
    """Which packs to delete and which to repack; ``pinned`` packs are kept whole."""
    # a live blob's header entry is live too: with 1 KiB chunks it is 4 % of a pack, with 64-byte ones 30 %,
    # and counting it as dead made every prune repack every pack of such a store
    live_bytes = figures.blob_bytes + HEADER_ENTRY.size * figures.live_count + SEAL_OVERHEAD + TRAILER.size
    result = SweepPlan(dead_chunks=figures.dead_chunks)
    small = []
    for n in range(len(packs)):
        pack_id, size = pack_id_of(packs, n), int(packs["size"][n])
        if pack_id in pinned or pack_id not in listed:
            continue  # a missing pack is `check`'s finding; its entries stay as evidence
        if figures.live_count[n] == 0:
            result.delete.append(pack_id)
        elif size - live_bytes[n] >= MAX_UNUSED * size:
            result.repack.append(pack_id)
        elif size < target // 4:
            small.append(pack_id)
    if len(small) > 1:
        result.repack += small  # small packs (many small backups) are joined into full ones
    known = {pack_id_of(packs, n) for n in range(len(packs))}
    result.delete += sorted(listed - known - pinned)  # indexed by nothing, their header unreadable
    return result


def pack_id_of(packs: np.ndarray, number: int) -> str:
    return packs["id"][number : number + 1].tobytes().hex()


def first_per_id(rows: np.ndarray) -> np.ndarray:
    """``rows`` (sorted by id) with one row per chunk: a chunk live in two repacked packs is copied once."""
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows["id"][1:] != rows["id"][:-1]
    return rows[first]


def dead_chunks(ids: np.ndarray, live: np.ndarray) -> int:
    """How many distinct chunks have no live entry; ``ids`` sorted (a chunk listed twice has adjacent rows).
    One pass over runs of equal ids: no sort, no set of a million ids."""
    if not len(ids):
        return 0
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    return int(np.count_nonzero(np.logical_or.reduceat(live, starts) == 0))


def repack(
    store: PackedStore, packs: np.ndarray, rows: np.ndarray, target: int, workers: int
) -> tuple[np.ndarray, np.ndarray]:
    """Copy the blobs of ``rows`` (index rows of ``packs``, sorted by pack and offset) into new packs; returns
    the new packs and their blobs as index tables (the blobs' pack numbers count from 0 in the new packs).

    Memory: the blobs of at most ``workers`` old packs and one new pack, and 49 bytes per copied blob."""
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
        name = layout.pack(pack_id_of(packs, int(group["pack"][0])))
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


def spill_index(store: PackedStore, entries: Spill, workers: int) -> tuple[np.ndarray, list[str]]:
    """The index objects in use, streamed into ``entries`` with one number per distinct pack (however many
    index objects list it), ``workers`` objects in memory at a time (an object holds up to 100,000 entries:
    about 10 MB sealed and opened); returns the packs table and the objects' names."""
    numbers: dict[bytes, int] = {}
    table: list[tuple[bytes, int]] = []
    names = []
    for name, packs, rows in pack_index.tables(store.repo.backend, store.repo.key, store.repo.skip, workers):
        names.append(name)
        renumber = np.zeros(len(packs), dtype="<u4")
        for n, size in enumerate(packs["size"].tolist()):
            raw = packs["id"][n : n + 1].tobytes()  # ``packs["id"][n]`` would strip trailing zero bytes
            if raw not in numbers:
                numbers[raw] = len(table)
                table.append((raw, size))
            renumber[n] = numbers[raw]
        rows = rows.copy()
        rows["pack"] = renumber[rows["pack"]]
        entries.add(rows)
    return np.array(table, dtype=pack_index.PACK), names


def sweep(
    store: PackedStore,
    marks: Spill,
    *,
    dry_run: bool,
    workers: int,
    lock_status: Callable[[str], str | None] | None,
    delete: Callable[[list[str]], list[str]],
    check_lock: Callable[[], None],
) -> dict[str, object]:
    """Run prune's sweep; returns the figures for its report. ``lock_status`` is None without Object Lock.
    ``marks``: the ids every kept backup names, spilled beside where the index is spilled now."""
    entries = Spill(marks.root, "entries", pack_index.ENTRY, "id")
    packs, index_names = spill_index(store, entries, workers)
    indexed = entries.rows
    listed = store.pack_ids()
    # packs no index names are read before anything is deleted: a killed backup's, or those of an index object
    # that was lost or does not authenticate (skipped by ``tables``), which may hold what backups need
    known = {pack_id_of(packs, n) for n in range(len(packs))}
    adopted = store.adopt(sorted(listed - known))
    if adopted:
        adopted_packs, adopted_rows = pack_index.entries_of(adopted)
        adopted_rows["pack"] += len(packs)
        packs = np.concatenate([packs, adopted_packs])
        entries.add(adopted_rows)
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
    figures_tally = tally(entries, marks, len(packs))
    sweep_plan = plan(packs, figures_tally, listed, target, pinned)
    if lock_status is not None:
        for pack_id in [*sweep_plan.delete, *sweep_plan.repack]:
            if held := lock_status(layout.pack(pack_id)):
                locked[layout.pack(pack_id)] = held
                pinned.add(pack_id)
        if pinned:
            sweep_plan = plan(packs, figures_tally, listed, target, pinned)
    figures: dict[str, object] = {
        "packs_present": len(listed),
        "packs_deleted": len(sweep_plan.delete),
        "packs_repacked": len(sweep_plan.repack),
        "chunks_deleted": sweep_plan.dead_chunks,
        "chunks_referenced": figures_tally.referenced,
        "chunks_present": indexed,
        "locked_objects": locked,
        "packs_written": 0,
    }
    if dry_run or not (sweep_plan.delete or sweep_plan.repack or sweep_plan.dead_chunks or adopted):
        return figures
    check_lock()
    written = pack_index.IndexWriter(store.repo.backend, store.repo.key, packs)
    copied = _write_kept(entries, marks, packs, sweep_plan, pinned, written)
    new_packs, new_rows = repack(store, packs, copied, target, workers)
    new_rows["pack"] += len(packs)
    written.packs = np.concatenate([packs, new_packs])
    written.add(new_rows)
    check_lock()
    written.close()
    store.repo.backend.sync()
    store.invalidate()
    check_lock()
    delete([n for n in index_names if n not in locked])
    delete([layout.pack(p) for p in [*sweep_plan.delete, *sweep_plan.repack]])
    figures["packs_written"] = len(new_packs)
    figures["chunks_present"] = written.rows
    return figures


def _write_kept(
    entries: Spill,
    marks: Spill,
    packs: np.ndarray,
    sweep_plan: SweepPlan,
    pinned: set[str],
    written: pack_index.IndexWriter,
) -> np.ndarray:
    """The second join: the live blobs of kept packs (every blob of pinned ones) go to the new index as it is
    written; returns the rows ``repack`` copies (live blobs of the packs to repack), sorted by pack and offset.

    Index objects naming kept packs may be written before the new packs: until the old index objects are
    deleted, every chunk is indexed by them too, and a crash leaves a chunk listed twice, which readers allow."""
    pack_ids = np.array([pack_id_of(packs, n) for n in range(len(packs))])
    gone = np.isin(pack_ids, [*sweep_plan.delete, *sweep_plan.repack])
    pinned_pack = np.isin(pack_ids, list(pinned))
    repacked = np.isin(pack_ids, sweep_plan.repack)
    copied = []
    for part in range(PARTS):
        rows, live, _ = joined(entries, marks, part)
        numbers = rows["pack"]
        written.add(rows[~gone[numbers] & (live | pinned_pack[numbers])])
        copied.append(first_per_id(rows[live & repacked[numbers]]))
    rows = np.concatenate([np.zeros(0, dtype=pack_index.ENTRY), *copied])
    return rows[np.lexsort((rows["offset"], rows["pack"]))]


def _packs_named(store: PackedStore, index_ids: list[str]) -> set[str]:
    named: set[str] = set()
    for index_id in index_ids:
        blob = store.repo.backend.get(layout.index(index_id))
        packs, _ = pack_index.decode(store.repo.key.unseal(INDEX, index_id, blob), f"index {index_id}")
        named |= {packs["id"][n : n + 1].tobytes().hex() for n in range(len(packs))}
    return named
