"""Content-defined chunking of a pushed stream, so plugins can ``write()`` while chunks are cut.

FastCDC decides a cut point from the bytes since the previous cut only, so cutting a sliding window and
holding back its last (unterminated) piece gives exactly the chunks of cutting the whole stream at once.

Each byte is copied once: the writes are collected (``bytes`` by reference, anything mutable copied, since
the caller may reuse it) and joined into an immutable window, and the chunks handed on are views of that
window. The window lives as long as one of its chunks is being hashed or sealed; the held-back piece is
copied into the next window.

The gear table is keyed, so chunk boundaries do not fingerprint known files. pyfastcdc takes a seed that it
XORs into every entry of its table, not a table: stores made before keyed gear tables use a 32-bit seed
(which a single known cut point lets an attacker filter cheaply, bit by bit); newer key generations also
pass the input through a secret permutation of the 256 byte values, so the chunker reads
``GEAR[perm[b]] ^ seed`` — a table chosen by the key among 256! x 2^63 (``MasterKey.gear``). That table is
written into pyfastcdc's own (drtool/repo/gear.py); only where that cannot be done are the cut points found
on a permuted copy of each window and applied to the bytes themselves.
"""

from __future__ import annotations

from drtool.repo.chunks import Buffer
from drtool.repo.config import ChunkerParams
from drtool.repo.gear import keyed_fastcdc


class StreamChunker:
    def __init__(self, params: ChunkerParams, gear: tuple[bytes | None, int]) -> None:
        self._cdc, self._permutation = keyed_fastcdc(params, *gear)  # a permutation left: translate windows
        # two largest chunks: at least one certain cut per window; the held-back piece (an average chunk)
        # copied again is 1/8 more copying, and a stream holds about three windows (writes, cutting, in flight)
        self._window = 2 * params.max_size
        self._pieces: list[bytes | memoryview] = []
        self._pending = 0

    def feed(self, data: Buffer) -> list[memoryview]:
        """Take more input; return every chunk whose end is now certain (usually none: a cheap call)."""
        if data:
            self._pieces.append(data if type(data) is bytes else bytes(data))
            self._pending += len(self._pieces[-1])
        return self._cut(final=False) if self._pending >= self._window else []

    def finish(self) -> list[memoryview]:
        return self._cut(final=True)

    def _cut(self, final: bool) -> list[memoryview]:
        if not self._pending:
            return []
        pieces, self._pieces, self._pending = self._pieces, [], 0
        joined = pieces[0] if len(pieces) == 1 and type(pieces[0]) is bytes else b"".join(pieces)
        window = memoryview(joined)
        scanned = window if self._permutation is None else memoryview(joined.translate(self._permutation))
        cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(scanned)]
        if not final:
            offset, _ = cuts.pop()  # the last piece ends at the window's edge, not at a cut point
            self._pieces, self._pending = [window[offset:]], len(window) - offset
        return [window[offset : offset + length] for offset, length in cuts]
