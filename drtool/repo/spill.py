"""Prune's big tables on local disk, split by chunk id into 256 parts (the id's first byte), read one part at a time.

Prune needs two tables as large as the store: the mark set (every chunk a kept backup names, 32 bytes each)
and the index (49 bytes per entry). Held whole they made prune's memory grow by about 230 bytes per chunk
(docs/performance.md, "Prune at 1 million chunks"). Written here as they are read (a manifest's ids, an index
object's entries), each table is a file per part; prune then joins the two tables one part at a time, and
since a chunk's id decides its part, a part holds every entry and every mark of its chunks: nothing needs
the whole table at once. Memory is about 1/256 of each table, plus what is being written.

The files hold chunk ids (keyed hashes: they tell equal chunks apart, never the data) and pack offsets, in a
private temporary directory that is removed when prune ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from drtool.repo.pack_index import unique_ids

PARTS = 256


def first_bytes(ids: np.ndarray) -> np.ndarray:
    """The first byte of each 32-byte id (its part)."""
    return np.ascontiguousarray(ids).view(np.uint8).reshape(-1, 32)[:, 0] if len(ids) else np.zeros(0, np.uint8)


class Spill:
    """One table (rows of ``dtype``, ids in ``field`` or the rows themselves) as 256 files under ``root``."""

    def __init__(self, root: Path, name: str, dtype: np.dtype, field: str | None = None) -> None:
        self.root, self.name, self.dtype, self.field = root, name, np.dtype(dtype), field
        self.rows = 0

    def _path(self, part: int) -> str:
        # a str, not a Path: pathlib interns every part of a path it parses (512 names here)
        return os.path.join(self.root, f"{self.name}-{part:02x}")

    def add(self, rows: np.ndarray) -> None:
        """Append ``rows`` to their parts."""
        if not len(rows):
            return
        parts = first_bytes(rows[self.field] if self.field else rows)
        order = np.argsort(parts, kind="stable")
        rows, bounds = rows[order], np.searchsorted(parts[order], np.arange(PARTS + 1))
        for part in np.flatnonzero(np.diff(bounds)).tolist():
            with open(self._path(part), "ab") as f:
                rows[bounds[part] : bounds[part + 1]].astype(self.dtype, copy=False).tofile(f)
        self.rows += len(rows)

    def part(self, part: int) -> np.ndarray:
        path = self._path(part)
        return np.fromfile(path, dtype=self.dtype) if os.path.exists(path) else np.zeros(0, dtype=self.dtype)


def unique_parts(spill: Spill) -> Iterator[np.ndarray]:
    """Each part's distinct ids, sorted, in id order (their concatenation is the whole table's)."""
    for part in range(PARTS):
        yield unique_ids(spill.part(part))
