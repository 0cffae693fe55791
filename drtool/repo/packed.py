"""Format 2: chunks in pack files of about 16 MiB, found through the index (docs/store-format.md, "Packs").

Writing. Each artifact stream seals its chunks on the session's worker pool (keyed BLAKE3 id, compression
where a sample says it pays, AES-GCM) and appends them, in order, to a pack of its own: a restore then
reads a run of consecutive chunks with one ranged GET. A full pack is uploaded on a bounded pool; what is
left of a stream's pack when it ends joins the session's shared pack, so small artifacts do not make small
packs. ``flush`` uploads the last packs, waits for every upload, then writes the session's index object:
only then may a manifest name the chunks.

Crash safety. A pack is one atomic PUT. A backup killed after some uploads leaves packs no index names;
the next backup lists ``packs/``, reads the header of each such pack (it is self-describing) and indexes it
with its own packs, so what landed is reused, not uploaded again. Prune deletes packs no index names.

Reading. A run of chunks that sit next to each other in one pack (at most ``RUN_BYTES``) is one ranged GET;
each blob is authenticated, decompressed and re-hashed. A reader fetches several runs at once, within the
byte budget it shares with the other readers of a restore (drtool/repo/reader.py). If a pack is gone (a
prune repacked it while this reader held an older index), the index is read again once and the run retried
from the chunks' new packs.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from drtool.crypto.master import BLOB, SEAL_OVERHEAD
from drtool.errors import IntegrityError, NotFound
from drtool.repo import layout, pack_index
from drtool.repo.chunks import Buffer, ChunkRef, Fetch, Stats, Verified
from drtool.repo.pack import TRAILER, BlobEntry, PackBuilder, header_length, parse_header
from drtool.repo.pack_index import Located, PackIndex, Shipped

if TYPE_CHECKING:
    from drtool.repo.repository import Repository

Prepared = tuple[str, int, int, Buffer | None]  # chunk id, plaintext length, codec, body to seal (None: stored)

RUN_BYTES = 8 * 1024 * 1024  # one ranged GET on restore: amortises a request; a 16 MiB pack is read in two
# Pack buffers are most of a backup's memory: one per stream being filled, the shared one, those uploading and
# the spares. In a heap profile at the peak of a 2 GiB checkpoint backup (3 streams) 8 of them, 160 MiB of
# 318, when up to 4 packs uploaded at once, 2 spares were kept and a buffer held its target and one more
# largest chunk (20 MiB). Two uploads at once keep a store on loopback or a LAN busy (docs/performance.md).
PACKS_IN_FLIGHT = 2
# Pack buffers kept for reuse: a fresh one is zeroed (``bytearray(n)``), in py-spy samples of a 2 GiB checkpoint
# backup with 1 spare about 0.3 CPU-s per GiB, as two uploads that finish together had one buffer dropped and
# the next pack zeroed a new one. A spare is a buffer that was in use a moment ago, so the peak hardly moves
# (paired, 2 GiB: 254-264 MiB with 2 against 258-281 with 1; docs/performance.md).
SPARE_BUFFERS = 2
HEADER_GUESS = 64 * 1024  # the tail read first when adopting a pack; a pack of 1,400 chunks has a longer header


class PackedStore:
    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._index: PackIndex | None = None
        self._lock = threading.Lock()
        self.hasher = repo.key.chunk_hasher(repo.config.chunk_id)

    def invalidate(self) -> None:
        """Forget the index read so far (this process wrote an index object: the next reader reads it)."""
        with self._lock:
            self._index = None

    def index(self, refresh: bool = False) -> PackIndex:
        """The union of the store's index objects, read once (again with ``refresh``)."""
        with self._lock:
            if self._index is None or refresh:
                self._index, _ = self.load()
            return self._index

    def load(self) -> tuple[PackIndex, list[str]]:
        """The index objects in use, read now, and their names (``pack_index.load``: others are skipped)."""
        return pack_index.load(self.repo.backend, self.repo.key, self.repo.skip)

    def open_blob(self, located: Located, blob: Buffer) -> bytes:
        """A blob's plaintext, authenticated, decompressed and checked against its id."""
        entry = located.blob
        what = f"chunk {entry.chunk_id[:12]} (pack {located.pack_id[:12]})"
        body, sealer = self.repo.key.opener(BLOB, entry.chunk_id, blob)
        data = bytes(self.repo.codec.decode(entry.codec, body, what))
        hasher = self.hasher if sealer is self.repo.key else sealer.chunk_hasher(self.repo.config.chunk_id)
        if len(data) != entry.plain_length or hasher(data) != entry.chunk_id:
            raise IntegrityError(f"{what}: content does not match its id")
        return data

    def read_header(self, pack_id: str) -> tuple[int, list[BlobEntry]]:
        """A pack's size and the blobs its own header lists."""
        name = layout.pack(pack_id)
        size = self.repo.backend.size(name)
        if size < SEAL_OVERHEAD + TRAILER.size:
            raise IntegrityError(f"pack {pack_id[:12]} is truncated ({size} bytes)")
        start = max(0, size - HEADER_GUESS)
        tail = self.repo.backend.get_range(name, start, size - start)
        need = header_length(tail)
        if need > len(tail) and need <= size:
            tail = self.repo.backend.get_range(name, size - need, need)
        return size, parse_header(self.repo.key, pack_id, tail, size)

    def pack_ids(self) -> set[str]:
        ids = set()
        for name in self.repo.backend.list(layout.PACKS):
            pack_id = layout.pack_id_of(name)
            if pack_id:
                ids.add(pack_id)
            else:
                self.repo.skip(name, "not a pack name")
        return ids

    def adopt(self, pack_ids: list[str]) -> list[Shipped]:
        """Of packs no index names, those whose own header authenticates, with their blobs (a killed backup's
        uploads, or the packs of an index that was lost or damaged); the others are skipped by name."""
        adopted = []
        for pack_id in pack_ids:
            try:
                size, entries = self.read_header(pack_id)
            except NotFound:
                continue  # deleted since the listing
            except IntegrityError as exc:
                self.repo.skip(layout.pack(pack_id), exc.message)
                continue
            adopted.append((pack_id, size, entries))
        return adopted

    # -- the ChunkStore interface ---------------------------------------------------------------------

    def writer(self, stats: Stats, workers: int) -> PackWriter:
        return PackWriter(self, stats, workers)

    def reads(self, chunks: list[ChunkRef]) -> Iterator[Fetch]:
        index = self.index()
        run: list[Located] = []
        for chunk_id, _ in chunks:
            located = index.lookup(chunk_id)
            if located is None:  # written since this process read the index? read it once more
                index = self.index(refresh=True)
                located = index.lookup(chunk_id)
            if located is None:
                raise IntegrityError(
                    f"chunk {chunk_id[:12]} is in no index of the store", "run `drtool check` to see the damage"
                )
            last = run[-1] if run else None
            if last is not None and (
                located.pack_id != last.pack_id
                or located.blob.offset != last.blob.offset + last.blob.sealed_length
                or located.blob.offset + located.blob.sealed_length - run[0].blob.offset > RUN_BYTES
            ):
                yield self._fetch(run)
                run = []
            run.append(located)
        if run:
            yield self._fetch(run)

    def _fetch(self, run: list[Located]) -> Fetch:
        return Fetch(sum(loc.blob.plain_length for loc in run), lambda: self._read_run(run))

    def _read_run(self, run: list[Located], retried: bool = False) -> list[Verified]:
        start = run[0].blob.offset
        length = run[-1].blob.offset + run[-1].blob.sealed_length - start
        try:
            data = memoryview(self.repo.backend.get_range(layout.pack(run[0].pack_id), start, length))
        except NotFound:
            if retried:
                raise IntegrityError(
                    f"pack {run[0].pack_id[:12]} is missing from the store", "run `drtool check` to see the damage"
                ) from None
            index = self.index(refresh=True)  # a prune may have moved these chunks into another pack
            moved = [index.lookup(loc.blob.chunk_id) or loc for loc in run]
            return [chunk for loc in moved for chunk in self._read_run([loc], retried=True)]
        if len(data) != length:
            raise IntegrityError(f"pack {run[0].pack_id[:12]} is shorter than its index says")
        return [
            (loc.blob.chunk_id, self.open_blob(loc, data[loc.blob.offset - start :][: loc.blob.sealed_length]))
            for loc in run
        ]

    def missing(self, chunk_ids: set[str], workers: int) -> list[str]:
        index = self.index()
        missing, packs = [], collections.defaultdict(list)
        for cid in chunk_ids:
            located = index.lookup(cid)
            if located is None:
                missing.append(cid)
            else:
                packs[located.pack_id].append(cid)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            present = dict(zip(packs, pool.map(lambda p: self.repo.backend.exists(layout.pack(p)), packs), strict=True))
        return missing + [cid for pid, cids in packs.items() if not present[pid] for cid in cids]


class PackWriter:
    """One backup session's packs: sealing on ``workers`` threads, uploads on a bounded pool."""

    def __init__(self, store: PackedStore, stats: Stats, workers: int) -> None:
        self.store = store
        self.repo = store.repo
        self.stats = stats
        self.workers = workers
        self.target = self.repo.config.packs.target_size if self.repo.config.packs else 16 << 20
        # a pack is shipped before a blob would take it past the target: it holds the target and its header
        self.capacity = self.target + HEADER_GUESS
        self._index = store.index(refresh=True)
        self._claimed: set[str] = set()
        self._lock = threading.Lock()
        self._shipped: list[Shipped] = self._adopt_orphans()
        self._spare: list[bytearray] = []  # buffers of uploaded packs, for the next packs (``PackBuilder``)
        self._spare_lock = threading.Lock()  # not ``_lock``: a builder takes a spare while ``_lock`` is held
        self._shared = self.builder()
        self._seal_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-seal")
        in_flight = min(workers, PACKS_IN_FLIGHT)
        self._upload_pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="drtool-pack")
        self._upload_slots = threading.BoundedSemaphore(in_flight)  # packs in flight: memory is 2 x 16 MiB
        self._uploads: list[Future[None]] = []
        self._failure: BaseException | None = None

    def _adopt_orphans(self) -> list[Shipped]:
        """Packs a killed backup uploaded but never indexed: indexed with this session's packs and reused."""
        adopted = self.store.adopt(sorted(self.store.pack_ids() - self._index.pack_ids()))
        for _, _, entries in adopted:
            self._claimed.update(e.chunk_id for e in entries)
        return adopted

    def stream(self) -> PackStream:
        return PackStream(self)

    def builder(self) -> PackBuilder:
        return PackBuilder(self.capacity, self._spare_buffer)

    def _spare_buffer(self) -> bytearray | None:
        with self._spare_lock:
            return self._spare.pop() if self._spare else None

    def recycle(self, buffer: bytearray) -> None:
        """Keep the buffer of a pack that is uploaded (or was taken into another) for a next pack."""
        if len(buffer) >= self.capacity // 2:  # a smaller one gave its allocation back when it was trimmed
            with self._spare_lock:
                if len(self._spare) < SPARE_BUFFERS:
                    self._spare.append(buffer)

    def __contains__(self, chunk_id: str) -> bool:
        with self._lock:
            return chunk_id in self._claimed or chunk_id in self._index

    def prepare(self, chunk: Buffer) -> Prepared:
        """(id, plaintext length, codec, body to seal); no body when the store or this session has the chunk.
        The parallel part of storing a chunk: sealing it into its pack follows in order (``PackStream``)."""
        chunk_id = self.store.hasher(chunk)
        if chunk_id in self:
            return chunk_id, len(chunk), 0, None
        codec, body = self.repo.codec.encode(chunk)
        return chunk_id, len(chunk), codec, body

    def claim(self, chunk_id: str) -> bool:
        """True for the first stream to hand over ``chunk_id``: it stores it, the others refer to it."""
        with self._lock:
            if chunk_id in self._claimed or chunk_id in self._index:
                return False
            self._claimed.add(chunk_id)
            return True

    def ship(self, pack: PackBuilder) -> None:
        """Upload a pack on the upload pool (waiting while ``workers`` packs are in flight)."""
        self.raise_failure()
        if not pack.entries:
            return
        pack_id = layout.new_pack_id()
        data = pack.finish(self.repo.key, pack_id)
        self.stats.add(bytes_stored=len(data))
        self._upload_slots.acquire()
        try:
            future = self._upload_pool.submit(self._upload, layout.pack(pack_id), data)
        except BaseException:
            self._upload_slots.release()
            raise
        future.add_done_callback(self._uploaded)
        with self._lock:
            self._uploads.append(future)
            self._shipped.append((pack_id, len(data), pack.entries))

    def _upload(self, name: str, data: bytearray) -> None:
        """PUT a pack, then offer its buffer for a next pack. Here, not in a done-callback: the futures stay
        listed until ``flush``, and a callback holding the buffer would keep every pack's memory alive."""
        self.repo.backend.put(name, data, write_once=True)
        self.recycle(data)

    def _uploaded(self, future: Future[None]) -> None:
        self._upload_slots.release()
        exc = future.exception() if not future.cancelled() else None
        if exc is not None and self._failure is None:
            self._failure = exc

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def keep_leftover(self, pack: PackBuilder) -> None:
        """A stream's last, partly filled pack joins the shared pack (uploaded once it is full)."""
        full: PackBuilder | None = pack
        taken = False
        with self._lock:
            if len(self._shared) + len(pack) <= self.target:
                self._shared.take(pack)
                full, taken = None, True
            elif len(self._shared) > len(pack):  # the two would overflow one buffer: the bigger goes alone
                full, self._shared = self._shared, pack
            if len(self._shared) >= self.target:
                full, self._shared = self._shared, self.builder()
        if taken:
            self.recycle(pack.buffer)
        if full is not None:
            self.ship(full)

    def flush(self) -> None:
        with self._lock:
            last, self._shared = self._shared, self.builder()
        self.ship(last)
        with self._lock:
            uploads = list(self._uploads)
        for future in uploads:
            future.result()
        with self._spare_lock:
            self._spare.clear()  # the session's packs are written: their memory goes back
        self.raise_failure()
        self.repo.backend.sync()  # every pack durable before the index that names it
        with self._lock:
            shipped, self._shipped = self._shipped, []
        if shipped:
            packs, entries = pack_index.entries_of(shipped)
            pack_index.write(self.repo.backend, self.repo.key, packs, entries)
            self.store.invalidate()

    def close(self) -> None:
        self._seal_pool.shutdown(wait=True, cancel_futures=True)
        self._upload_pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, chunk: Buffer) -> Future[Prepared]:
        return self._seal_pool.submit(self.prepare, chunk)


class PackStream:
    """One artifact's chunks, sealed in parallel and appended in order to the stream's own pack."""

    def __init__(self, writer: PackWriter) -> None:
        self._writer = writer
        self._pending: collections.deque[Future[Prepared]] = collections.deque()
        self._refs: list[ChunkRef] = []
        self._pack = writer.builder()
        self._limit = 2 * writer.workers  # chunks prepared ahead of the append: bounds memory per stream

    def add(self, chunk: Buffer) -> None:
        self._pending.append(self._writer.submit(chunk))
        while self._pending and (len(self._pending) > self._limit or self._pending[0].done()):
            self._append(self._pending.popleft().result())

    def _append(self, prepared: Prepared) -> None:
        chunk_id, length, codec, body = prepared
        self._refs.append((chunk_id, length))
        new = body is not None and self._writer.claim(chunk_id)
        self._writer.stats.add(bytes_read=length, chunks=1, chunks_new=int(new))
        if new:
            assert body is not None
            if len(self._pack) + len(body) + SEAL_OVERHEAD > self._writer.target and self._pack.entries:
                full, self._pack = self._pack, self._writer.builder()  # shipped before it outgrows its buffer
                self._writer.ship(full)
            self._pack.seal(self._writer.repo.key, chunk_id, codec, length, body)

    def finish(self) -> list[ChunkRef]:
        while self._pending:
            self._append(self._pending.popleft().result())
        self._writer.keep_leftover(self._pack)
        self._pack = PackBuilder(self._writer.capacity)  # nothing more comes: this one is never filled
        return self._refs

    def abandon(self) -> None:
        """Stop waiting for this artifact; what it already sealed is kept (another stream may refer to it)."""
        for future in self._pending:
            future.cancel()
        for future in self._pending:
            with contextlib.suppress(Exception):
                future.result()  # unclaimed: no other stream refers to these
        self._pending.clear()
        with contextlib.suppress(Exception):  # the error that doomed the artifact is the one to surface
            self._writer.keep_leftover(self._pack)
