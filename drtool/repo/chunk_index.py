"""Which chunks a store already holds, learned one id prefix at a time.

A backup asks for every chunk it cuts. One LIST of ``chunks/<xx>/`` answers for every id starting with
``xx``, so an S3 backup costs at most 256 listings instead of one HEAD request per chunk. The index lives
for one backup session; chunks added during it are recorded as they are stored.
"""

from __future__ import annotations

import threading

from drtool.backends.backend import Backend
from drtool.repo import layout


class ChunkIndex:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._known: dict[str, set[str]] = {}
        self._locks = {f"{i:02x}": threading.Lock() for i in range(256)}

    def _prefix_set(self, prefix: str) -> set[str]:
        with self._locks[prefix]:
            known = self._known.get(prefix)
            if known is None:
                names = self._backend.list(f"{layout.CHUNKS}{prefix}/")
                known = {cid for cid in map(layout.chunk_id_of, names) if cid}
                self._known[prefix] = known
            return known

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._prefix_set(chunk_id[:2])

    def add(self, chunk_id: str) -> None:
        self._prefix_set(chunk_id[:2]).add(chunk_id)
