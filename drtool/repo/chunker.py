"""Content-defined chunking of a pushed stream, so plugins can ``write()`` while chunks are cut.

FastCDC decides a cut point from the bytes since the previous cut only, so cutting a sliding window and
holding back its last (unterminated) piece gives exactly the chunks of cutting the whole stream at once.

The gear table is keyed, so chunk boundaries do not fingerprint known files. pyfastcdc takes a seed that it
XORs into every entry of its table, not a table: stores made before keyed gear tables use a 32-bit seed
(which a single known cut point lets an attacker filter cheaply, bit by bit); newer key generations also
pass the input through a secret permutation of the 256 byte values, so the chunker reads
``GEAR[perm[b]] ^ seed`` — a table chosen by the key among 256! x 2^63 (``MasterKey.gear``). The cut points
found on the permuted bytes are applied to the bytes themselves.
"""

from __future__ import annotations

from pyfastcdc import FastCDC

from drtool.repo.config import ChunkerParams


class StreamChunker:
    def __init__(self, params: ChunkerParams, gear: tuple[bytes | None, int]) -> None:
        permutation, seed = gear
        self._cdc = FastCDC(
            avg_size=params.avg_size,
            min_size=params.min_size,
            max_size=params.max_size,
            normalized_chunking=params.normalized_chunking,
            seed=seed,
        )
        self._permutation = permutation
        self._window = 4 * params.max_size
        self._buf = bytearray()
        self._keyed = bytearray()  # the buffer's permuted bytes (with a permutation), as far as translated

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take more input; return every chunk whose end is now certain (usually none: a cheap call)."""
        self._buf += data
        return self._cut(final=False) if len(self._buf) >= self._window else []

    def finish(self) -> list[bytes]:
        return self._cut(final=True)

    def _cut(self, final: bool) -> list[bytes]:
        if not self._buf:
            return []
        scanned = self._buf
        if self._permutation is not None:  # each byte is translated once, when it is first scanned
            self._keyed += self._buf[len(self._keyed) :].translate(self._permutation)
            scanned = self._keyed
        # the buffer cannot be resized while a view of it is alive: release it even when interrupted (a signal
        # handler raising mid-cut), or the writes made while unwinding (tarfile's close) fail with BufferError
        with memoryview(scanned) as view:
            cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(view)]
        if not final:
            cuts.pop()  # the last piece ends at the window's edge, not at a cut point
        with memoryview(self._buf) as view:
            chunks = [bytes(view[offset : offset + length]) for offset, length in cuts]
        consumed = sum(length for _, length in cuts)
        del self._buf[:consumed]
        del self._keyed[:consumed]
        return chunks
