"""Content-defined chunking of a pushed stream, so plugins can ``write()`` while chunks are cut.

FastCDC decides a cut point from the bytes since the previous cut only, so cutting a sliding window and
holding back its last (unterminated) piece gives exactly the chunks of cutting the whole stream at once.

Each byte is copied once, into the chunker's window: ``feed`` copies a write into it, and a source with
``readinto`` reads straight into it (``room``, then ``filled``: no bytes object per read, no join). The
chunks handed on are views of the window; the held-back piece is copied into the next window. A window is
reused once no view of it is left (its chunks sealed, deduplicated or dropped), so a stream holds about two
windows, not a window's worth of reads, the window being joined and those in flight.

The gear table is keyed, so chunk boundaries do not fingerprint known files. pyfastcdc takes a seed that it
XORs into every entry of its table, not a table: stores made before keyed gear tables use a 32-bit seed
(which a single known cut point lets an attacker filter cheaply, bit by bit); newer key generations also
pass the input through a secret permutation of the 256 byte values, so the chunker reads
``GEAR[perm[b]] ^ seed`` — a table chosen by the key among 256! x 2^63 (``MasterKey.gear``). That table is
written into pyfastcdc's own (drtool/repo/gear.py); only where that cannot be done are the cut points found
on a permuted copy of each window and applied to the bytes themselves.
"""

from __future__ import annotations

import sys

from drtool.repo.chunks import Buffer
from drtool.repo.config import ChunkerParams
from drtool.repo.gear import keyed_fastcdc

RETIRED = 2  # windows kept for reuse per stream: the one whose chunks are in flight, and one more


def _unshared() -> int:
    """What ``sys.getrefcount`` says of a list's item that nothing else refers to (interpreters differ in
    what the call itself adds), measured the way ``StreamChunker._fresh`` asks it."""
    held = [bytearray()]
    return sys.getrefcount(held[0])


_UNSHARED = _unshared()


class StreamChunker:
    def __init__(self, params: ChunkerParams, gear: tuple[bytes | None, int]) -> None:
        self._cdc, self._permutation = keyed_fastcdc(params, *gear)  # a permutation left: translate windows
        # two largest chunks: at least one certain cut per window; the held-back piece (an average chunk)
        # copied again is 1/8 more copying
        self._window = 2 * params.max_size
        self._buffer: bytearray | None = None  # the window being filled
        self._filled = 0
        self._retired: list[bytearray] = []  # windows cut, reused once no chunk of theirs is alive

    def room(self) -> memoryview:
        """The free part of the window: read into it, then say how much with ``filled``."""
        if self._buffer is None:
            self._buffer = self._fresh()
        return memoryview(self._buffer)[self._filled :]

    def filled(self, n: int) -> list[memoryview]:
        """``n`` more bytes are in the window (written into ``room``); return every chunk whose end is now
        certain (usually none: a cheap call)."""
        self._filled += n
        return self._cut(final=False) if self._buffer is not None and self._filled == len(self._buffer) else []

    def feed(self, data: Buffer) -> list[memoryview]:
        """Take more input (copied into the window); return every chunk whose end is now certain."""
        chunks: list[memoryview] = []
        rest = memoryview(data).cast("B")
        while rest:
            room = self.room()
            n = min(len(room), len(rest))
            room[:n] = rest[:n]
            rest = rest[n:]
            chunks += self.filled(n)
        return chunks

    def finish(self) -> list[memoryview]:
        return self._cut(final=True)

    def _fresh(self) -> bytearray:
        """A window to fill: a retired one no chunk view holds any more, else a new one."""
        for i in range(len(self._retired)):
            # held by the list alone: no memoryview of it is left (every view pins the object it views), so
            # nothing reads it any more and it may be overwritten
            if sys.getrefcount(self._retired[i]) <= _UNSHARED:
                return self._retired.pop(i)
        return bytearray(self._window)

    def _cut(self, final: bool) -> list[memoryview]:
        if not self._filled or self._buffer is None:
            return []
        buffer, length = self._buffer, self._filled
        self._buffer, self._filled = None, 0
        window = memoryview(buffer)[:length]
        scanned = window if self._permutation is None else memoryview(buffer.translate(self._permutation))[:length]
        cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(scanned)]
        if not final:
            offset, _ = cuts.pop()  # the last piece ends at the window's edge, not at a cut point
            self._buffer = self._fresh()
            self._filled = length - offset
            self._buffer[: self._filled] = window[offset:]
        self._retired = [buffer, *self._retired][:RETIRED]
        return [window[offset : offset + size] for offset, size in cuts]
