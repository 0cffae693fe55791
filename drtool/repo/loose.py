"""Format 1: one sealed object per chunk, ``chunks/<id[0:2]>/<id>`` (docs/store-format.md, "Chunks").

Stores created before format 2 keep working unchanged: backups into them still write loose chunks, so a
store never holds both layouts.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING

from drtool.crypto.master import CHUNK
from drtool.errors import IntegrityError, NotFound
from drtool.repo import layout
from drtool.repo.chunk_index import ChunkIndex
from drtool.repo.chunks import Buffer, ChunkRef, Fetch, Stats

if TYPE_CHECKING:
    from drtool.repo.repository import Repository


class LooseStore:
    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def encode(self, chunk_id: str, data: Buffer) -> bytes:
        codec, payload = self.repo.codec.encode(data)
        return self.repo.key.seal(CHUNK, chunk_id, bytes([codec]) + bytes(payload))

    def decode(self, chunk_id: str, blob: bytes) -> bytes:
        body, sealer = self.repo.key.opener(CHUNK, chunk_id, blob)  # a retired key's chunk: its own id key
        data = bytes(self.repo.codec.decode(body[0], memoryview(body)[1:], f"chunk {chunk_id[:12]}"))
        if sealer.chunk_id(data) != chunk_id:
            raise IntegrityError(f"chunk {chunk_id[:12]} content does not match its id")
        return data

    def has(self, chunk_id: str) -> bool:
        return self.repo.backend.exists(layout.chunk(chunk_id))

    def put(self, chunk_id: str, data: Buffer, index: ChunkIndex) -> int:
        """Store a chunk unless ``index`` says it is there; returns the bytes written (0 if deduplicated)."""
        if chunk_id in index:
            return 0
        blob = self.encode(chunk_id, data)
        self.repo.backend.put(layout.chunk(chunk_id), blob, write_once=True)
        index.add(chunk_id)
        return len(blob)

    def get(self, chunk_id: str) -> bytes:
        try:
            blob = self.repo.backend.get(layout.chunk(chunk_id))
        except NotFound:
            raise IntegrityError(
                f"chunk {chunk_id[:12]} is missing from the store", "run `drtool check` to list every missing chunk"
            ) from None
        return self.decode(chunk_id, blob)

    def ids(self) -> Iterator[str]:
        for name in self.repo.backend.list(layout.CHUNKS):
            cid = layout.chunk_id_of(name)
            if cid:
                yield cid
            else:
                self.repo.skip(name, "not a chunk name")

    # -- the ChunkStore interface ---------------------------------------------------------------------

    def writer(self, stats: Stats, workers: int) -> LooseWriter:
        return LooseWriter(self, stats, workers)

    def reads(self, chunks: list[ChunkRef]) -> Iterator[Fetch]:
        for chunk_id, length in chunks:
            yield Fetch(length, lambda cid=chunk_id: [(cid, self.get(cid))])

    def missing(self, chunk_ids: set[str], workers: int) -> list[str]:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(self.has, cid): cid for cid in chunk_ids}
            return [futures[f] for f in as_completed(futures) if not f.result()]


class _Upload:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False


class LooseWriter:
    """A bounded pool seals and uploads chunks; memory stays within ``2 x workers`` chunks in flight."""

    def __init__(self, store: LooseStore, stats: Stats, workers: int) -> None:
        self._store = store
        self._stats = stats
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-chunk")
        self._slots = threading.BoundedSemaphore(2 * workers)
        self._index = ChunkIndex(store.repo.backend)
        self._seen: dict[str, _Upload] = {}
        self._seen_lock = threading.Lock()

    def stream(self) -> LooseStream:
        return LooseStream(self)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._index

    def submit(self, data: Buffer) -> Future[ChunkRef]:
        self._slots.acquire()
        future = self._pool.submit(self._store_chunk, data)
        future.add_done_callback(lambda _: self._slots.release())
        return future

    def _store_chunk(self, data: Buffer) -> ChunkRef:
        chunk_id = self._store.repo.key.chunk_id(data)
        with self._seen_lock:
            upload = self._seen.get(chunk_id)
            owner = upload is None
            if owner:
                upload = self._seen[chunk_id] = _Upload()
        assert upload is not None
        if owner:
            try:
                stored = self._store.put(chunk_id, data, self._index)
                upload.ok = True
            finally:
                upload.done.set()
        else:
            # the same chunk is being uploaded by another worker: wait, and only upload if that one failed
            upload.done.wait()
            stored = 0 if upload.ok else self._store.put(chunk_id, data, self._index)
        self._stats.add(bytes_read=len(data), chunks=1, bytes_stored=stored, chunks_new=int(stored > 0))
        return chunk_id, len(data)

    def flush(self) -> None:
        self._store.repo.backend.sync()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class LooseStream:
    def __init__(self, writer: LooseWriter) -> None:
        self._writer = writer
        self._futures: list[Future[ChunkRef]] = []

    def add(self, chunk: Buffer) -> None:
        self._futures.append(self._writer.submit(chunk))

    def finish(self) -> list[ChunkRef]:
        return [f.result() for f in self._futures]

    def abandon(self) -> None:
        for f in self._futures:
            f.cancel()
        for f in self._futures:
            with contextlib.suppress(Exception):
                f.result()
