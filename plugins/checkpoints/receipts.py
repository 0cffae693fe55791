"""What a restore saw while it wrote each object, so that its verification reads back a sample, not all.

Re-reading every restored byte doubled a restore's work on the target (issue 31: restore at 57 % of a
plain copy with verification on, 71 % without). Most of that re-read proves nothing new: the bytes handed
to the target are the store's verified bytes (the reader checks every chunk's keyed id, and the sequence
against the manifest), and the target checks what it receives against the request's payload SHA-256
(SigV4 over http) or TLS. What is left to prove is that the target holds what it acknowledged. So, while
an object streams to the target, a CRC-32 (ISA-L, about 0.1 CPU-s per GiB) of each ``BLOCK`` handed over is
kept, and after the write the target's stat of it (size, ETag and time; a file's inode and ctime).
Verification then stats every object again (replaced, truncated or gone since: caught) and reads back a
sample of blocks: all of an object up to ``WHOLE`` (commit files, indexes, small shards), else its first
and last block and ``RANDOM_BLOCKS`` chosen at random when verification runs; ``verify=full`` reads
everything back against the backup's SHA-256, as does a verification with no receipt (an object this run
did not write, or a verification run on its own).

The receipts live as long as the restore context they were made for, and only in this process.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import weakref
from typing import IO, Any

from isal.isal_zlib import crc32

from .location import IO_BLOCK, ObjectStat

BLOCK = IO_BLOCK
WHOLE = 4 * BLOCK  # objects up to this size are read back whole in a sampled verification
RANDOM_BLOCKS = 2  # besides the first and the last block of a larger object


@dataclasses.dataclass(frozen=True)
class Receipt:
    """One object as written: the target's stat right after the write, and the CRC-32 of each block."""

    stat: ObjectStat
    crcs: tuple[int, ...]


class Tally:
    """A stream passed through to an uploader, taking the CRC-32 of each ``BLOCK`` of what it hands over."""

    def __init__(self, stream: IO[bytes] | Any) -> None:
        self._stream = stream
        self._crc = 0
        self._fill = 0
        self.crcs: list[int] = []

    def read(self, n: int = -1) -> bytes:
        data = self._stream.read(n)
        self._count(memoryview(data))
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        n = int(self._stream.readinto(buffer))
        self._count(memoryview(buffer)[:n])
        return n

    def _count(self, view: memoryview) -> None:
        while view:
            take = min(len(view), BLOCK - self._fill)
            self._crc = crc32(view[:take], self._crc)
            self._fill += take
            view = view[take:]
            if self._fill == BLOCK:
                self._close_block()

    def _close_block(self) -> None:
        self.crcs.append(self._crc)
        self._crc = self._fill = 0

    def done(self) -> tuple[int, ...]:
        if self._fill:
            self._close_block()
        return tuple(self.crcs)


def sample(size: int) -> list[int]:
    """The blocks of an object of ``size`` bytes that a sampled verification reads back."""
    count = -(-size // BLOCK)
    if size <= WHOLE:
        return list(range(count))
    middle = random.SystemRandom().sample(range(1, count - 1), min(RANDOM_BLOCKS, count - 2))
    return [0, *sorted(middle), count - 1]


def block_crc(data: bytes) -> int:
    return crc32(data)


class Receipts:
    """The receipts of the restores made with one restore context, by target URL and key."""

    _ALL: weakref.WeakKeyDictionary[Any, Receipts] = weakref.WeakKeyDictionary()
    _LOCK = threading.Lock()

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], Receipt] = {}

    @classmethod
    def of(cls, ctx: Any) -> Receipts:
        with cls._LOCK:
            found = cls._ALL.get(ctx)
            if found is None:
                found = cls._ALL[ctx] = cls()
            return found

    def keep(self, url: str, key: str, receipt: Receipt) -> None:
        self._by_key[(url, key)] = receipt

    def get(self, url: str, key: str) -> Receipt | None:
        return self._by_key.get((url, key))
