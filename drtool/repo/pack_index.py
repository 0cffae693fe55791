"""The index of a format-2 store: which pack holds each chunk, at which offset.

``index/<index-id>`` objects are sealed (kind ``index``) binary tables (docs/store-format.md, "Index"):

    "drtool-index-v1\\n" || u32 pack count || u32 entry count || packs || entries

with 20-byte packs ``pack id (16) || pack size in bytes (u32)`` and 49-byte entries ``chunk id (32) ||
pack number (u32) || offset (u32) || sealed length (u32) || plaintext length (u32) || codec (u8)``, all
little-endian. A backup writes one index object for the packs it uploaded; prune replaces many by one.
Readers take the union of all of them (a chunk listed twice, in two packs, may be read from either). An
index lists the chunks of a pack worth finding: a backup all it wrote, prune only those still referenced;
the pack's size tells the next prune how much of it is dead.

In memory the union is one numpy array sorted by chunk id: 49 bytes per chunk whatever the store's size,
where a dict of Python objects would take about five times that (a million chunks: 49 MB, not 250).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from drtool.backends.backend import Backend
from drtool.crypto.master import INDEX, MasterKey
from drtool.errors import IntegrityError
from drtool.repo import layout
from drtool.repo.pack import BlobEntry

MAGIC = b"drtool-index-v1\n"
COUNTS = struct.Struct("<II")
PACK = np.dtype([("id", "S16"), ("size", "<u4")])
ENTRY = np.dtype(
    [("id", "S32"), ("pack", "<u4"), ("offset", "<u4"), ("sealed", "<u4"), ("plain", "<u4"), ("codec", "u1")]
)
MAX_ENTRIES = 100_000  # per index object (4.9 MB): a huge backup's index is written in pieces


Shipped = tuple[str, int, list[BlobEntry]]  # a pack written: its id, size and blobs


@dataclasses.dataclass(frozen=True)
class Located:
    pack_id: str
    blob: BlobEntry


def encode(packs: np.ndarray, entries: np.ndarray) -> bytes:
    head = MAGIC + COUNTS.pack(len(packs), len(entries))
    return head + packs.astype(PACK, copy=False).tobytes() + entries.astype(ENTRY, copy=False).tobytes()


def decode(data: bytes, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(packs, entries) of one index object's plaintext."""
    start = len(MAGIC) + COUNTS.size
    if not data.startswith(MAGIC) or len(data) < start:
        raise IntegrityError(f"{what} is not a drtool index")
    npacks, nentries = COUNTS.unpack_from(data, len(MAGIC))
    if len(data) != start + PACK.itemsize * npacks + ENTRY.itemsize * nentries:
        raise IntegrityError(f"{what} has the wrong size for {npacks} packs and {nentries} entries")
    packs = np.frombuffer(data, dtype=PACK, count=npacks, offset=start)
    entries = np.frombuffer(data, dtype=ENTRY, count=nentries, offset=start + PACK.itemsize * npacks)
    if nentries and int(entries["pack"].max()) >= npacks:
        raise IntegrityError(f"{what} names a pack it does not list")
    return packs, entries


def entries_of(shipped: Iterable[Shipped]) -> tuple[np.ndarray, np.ndarray]:
    """Packs (id, size) and their blobs as an index table."""
    packs = []
    rows = []
    for number, (pack_id, size, blobs) in enumerate(shipped):
        packs.append((bytes.fromhex(pack_id), size))
        rows += [(bytes.fromhex(b.chunk_id), number, b.offset, b.sealed_length, b.plain_length, b.codec) for b in blobs]
    return np.array(packs, dtype=PACK), np.array(rows, dtype=ENTRY)


def write(backend: Backend, key: MasterKey, packs: np.ndarray, entries: np.ndarray) -> list[str]:
    """Write ``entries`` as index objects of at most MAX_ENTRIES each; returns their names."""
    names = []
    for start in range(0, max(len(entries), 1), MAX_ENTRIES):
        part = entries[start : start + MAX_ENTRIES]
        used = np.unique(part["pack"])
        renumber = np.zeros(len(packs), dtype="<u4")
        renumber[used] = np.arange(len(used), dtype="<u4")
        part = part.copy()
        part["pack"] = renumber[part["pack"]]
        index_id = layout.new_index_id()
        plain = encode(packs[used], part)
        backend.put(layout.index(index_id), key.seal(INDEX, index_id, plain), exclusive=True)
        names.append(layout.index(index_id))
    return names


class IndexWriter:
    """Index objects written as their rows come, ``MAX_ENTRIES`` at a time (prune streams its new index
    instead of holding it). ``packs`` is the table the rows' pack numbers refer to; it may grow between
    ``add`` calls (rows already added keep their numbers)."""

    def __init__(self, backend: Backend, key: MasterKey, packs: np.ndarray) -> None:
        self.backend, self.key, self.packs = backend, key, packs
        self.names: list[str] = []
        self.rows = 0
        self._pending: list[np.ndarray] = []
        self._count = 0

    def add(self, rows: np.ndarray) -> None:
        self._pending.append(rows)
        self._count += len(rows)
        self.rows += len(rows)
        if self._count >= MAX_ENTRIES:
            rows = np.concatenate(self._pending)
            whole = len(rows) - len(rows) % MAX_ENTRIES
            self.names += write(self.backend, self.key, self.packs, rows[:whole])
            self._pending, self._count = [rows[whole:]], len(rows) - whole

    def close(self) -> list[str]:
        """Write what is left (an empty index object when nothing was added at all); returns every name."""
        if self._count or not self.names:
            rest = np.concatenate([np.zeros(0, dtype=ENTRY), *self._pending])
            self.names += write(self.backend, self.key, self.packs, rest)
        self._pending, self._count = [], 0
        return self.names


class PackIndex:
    """The union of index objects: chunk id -> (pack, blob), looked up by binary search."""

    def __init__(self, packs: np.ndarray, entries: np.ndarray) -> None:
        self.packs = packs  # PACK rows (raw id, size), numbered by the entries' ``pack`` field
        order = np.argsort(entries["id"], kind="stable")
        self.entries = entries[order]
        self._ids = self.entries["id"]

    @classmethod
    def empty(cls) -> PackIndex:
        return cls(np.zeros(0, dtype=PACK), np.zeros(0, dtype=ENTRY))

    @classmethod
    def merge(cls, tables: list[tuple[np.ndarray, np.ndarray]]) -> PackIndex:
        """The union of index objects' tables; empties ``tables`` once they are copied, so that their
        plaintexts are freed before the sort (at a million entries, 49 MB less at the peak)."""
        if not tables:
            return cls.empty()
        every = np.concatenate([table_packs for table_packs, _ in tables])
        entries = np.concatenate([table_entries for _, table_entries in tables])
        numbers, base, at = entries["pack"], 0, 0  # a view: renumbered in place, per index object
        for table_packs, table_entries in tables:
            numbers[at : at + len(table_entries)] += base
            at += len(table_entries)
            base += len(table_packs)
        tables.clear()
        # one number per distinct pack, however many index objects list it
        _, first, inverse = np.unique(every["id"], return_index=True, return_inverse=True)
        entries["pack"] = inverse.astype("<u4")[numbers]
        return cls(every[first], entries)

    def __len__(self) -> int:
        return len(self.entries)

    def _find(self, chunk_id: str) -> int | None:
        key = bytes.fromhex(chunk_id)
        i = int(np.searchsorted(self._ids, key))
        if i < len(self._ids) and self._ids[i : i + 1].tobytes() == key:
            return i
        return None

    def __contains__(self, chunk_id: str) -> bool:
        return self._find(chunk_id) is not None

    def lookup(self, chunk_id: str) -> Located | None:
        i = self._find(chunk_id)
        if i is None:
            return None
        e = self.entries[i]
        blob = BlobEntry(chunk_id, int(e["codec"]), int(e["offset"]), int(e["sealed"]), int(e["plain"]))
        return Located(self.pack_id(int(e["pack"])), blob)

    def pack_id(self, number: int) -> str:
        return self.packs["id"][number : number + 1].tobytes().hex()

    def pack_ids(self) -> set[str]:
        """Every pack an index object lists."""
        return {self.pack_id(n) for n in range(len(self.packs))}

    def pack_sizes(self) -> dict[str, int]:
        return {self.pack_id(n): int(self.packs["size"][n]) for n in range(len(self.packs))}

    def by_pack(self) -> Iterator[tuple[str, np.ndarray]]:
        """(pack id, its entries sorted by offset), one pack at a time (duplicates across index objects merged)."""
        order = np.lexsort((self.entries["offset"], self.entries["pack"]))
        rows = self.entries[order]
        numbers = rows["pack"]
        bounds = np.flatnonzero(numbers[1:] != numbers[:-1]) + 1
        start = 0
        for end in [*bounds.tolist(), len(rows)]:
            if end > start:
                _, keep = np.unique(rows[start:end]["offset"], return_index=True)
                yield self.pack_id(int(numbers[start])), rows[start:end][keep]
            start = end


SUPERSEDED = f"{layout.INDEX}superseded/"  # `drtool repair index`'s markers (docs/store-format.md, "Index")
Skip = Callable[[str, str], None]  # an object passed over, and why (``Repository.skip``)


def load(backend: Backend, key: MasterKey, skip: Skip, workers: int = 8) -> tuple[PackIndex, list[str]]:
    """The union of the index objects in use (``tables``), and their names."""
    read = list(tables(backend, key, skip, workers))
    return PackIndex.merge([(packs, entries) for _, packs, entries in read]), [name for name, _, _ in read]


def tables(
    backend: Backend, key: MasterKey, skip: Skip, workers: int = 8
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Each index object in use: its name and (packs, entries), read ``workers`` at a time (prune streams them
    without holding the union).

    In use: named like an index object, one ``key`` may open (a retired key: those it sealed before it was
    retired), authenticated, decoded, and not superseded by a repair's marker. Any
    other object under ``index/`` is handed to ``skip``: one planted object must not stop every backup and
    restore, and nothing it claims is believed (an unauthenticated index could point chunks anywhere)."""
    names, markers = [], []
    for name in backend.list(layout.INDEX):
        if layout.index_id_of(name):
            names.append(name)
        elif name.startswith(SUPERSEDED):
            markers.append(name)
        else:
            skip(name, "not an index object name")
    superseded = _superseded(backend, key, markers, skip)
    names = [n for n in names if (i := layout.index_id_of(n)) not in superseded and key.may_open(INDEX, i or "")]

    def read(name: str) -> tuple[np.ndarray, np.ndarray] | None:
        index_id = layout.index_id_of(name) or ""
        try:
            return decode(key.unseal(INDEX, index_id, backend.get(name)), f"index {index_id}")
        except IntegrityError as exc:
            skip(name, exc.message)
            return None

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-index") as pool:
        for start in range(0, len(names), workers):
            batch = names[start : start + workers]
            for name, table in zip(batch, pool.map(read, batch), strict=True):
                if table is not None:
                    yield name, *table


def supersede(backend: Backend, key: MasterKey, index_ids: Iterable[str]) -> str:
    """Write a marker that retires ``index_ids``: readers ignore them from now on (Object Lock may keep a
    planted or replaced index object in the store for years; it then costs its storage and nothing else)."""
    seal_name = f"{SUPERSEDED[len(layout.INDEX) :]}{layout.new_index_id()}"
    body = json.dumps({"version": 1, "superseded": sorted(index_ids)}).encode()
    backend.put(f"{layout.INDEX}{seal_name}", key.seal(INDEX, seal_name, body), exclusive=True)
    return f"{layout.INDEX}{seal_name}"


def _superseded(backend: Backend, key: MasterKey, markers: list[str], skip: Skip) -> set[str]:
    """The index ids that authenticated markers retire (a marker without the key retires nothing)."""
    ids: set[str] = set()
    for name in markers:
        try:
            data = json.loads(key.unseal(INDEX, name[len(layout.INDEX) :], backend.get(name)))
            ids.update(str(i) for i in data["superseded"])
        except IntegrityError as exc:
            skip(name, exc.message)
        except (ValueError, KeyError, TypeError):
            skip(name, "not a drtool index marker")
    return ids


def hex_ids(entries: np.ndarray) -> list[str]:
    """The chunk ids of ``entries`` (index rows, or a plain array of 32-byte ids such as prune's mark set)
    as hex strings (``entries['id']`` would strip trailing zero bytes)."""
    raw = (entries["id"] if entries.dtype.names else entries).tobytes()
    return [raw[i : i + 32].hex() for i in range(0, len(raw), 32)]


def unique_ids(ids: np.ndarray) -> np.ndarray:
    """``ids`` (32-byte strings) each once, sorted; sorts ``ids`` in place (no second copy of a million ids).
    Not ``np.unique``: numpy 2 hashes fixed-width byte strings, which took 20 s for two million ids here,
    against 1.6 s for this sort."""
    ids.sort()
    if len(ids) < 2:
        return ids
    distinct = np.ones(len(ids), dtype=bool)
    distinct[1:] = ids[1:] != ids[:-1]
    return ids[distinct]
