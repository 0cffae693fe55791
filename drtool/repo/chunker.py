"""Content-defined chunking of a pushed stream, so plugins can ``write()`` while chunks are cut.

FastCDC decides a cut point from the bytes since the previous cut only, so cutting a sliding window and
holding back its last (unterminated) piece gives exactly the chunks of cutting the whole stream at once.
"""

from __future__ import annotations

from pyfastcdc import FastCDC

from drtool.repo.config import ChunkerParams


class StreamChunker:
    def __init__(self, params: ChunkerParams, seed: int) -> None:
        self._cdc = FastCDC(
            avg_size=params.avg_size,
            min_size=params.min_size,
            max_size=params.max_size,
            normalized_chunking=params.normalized_chunking,
            seed=seed,
        )
        self._window = 4 * params.max_size
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take more input; return every chunk whose end is now certain (usually none: a cheap call)."""
        self._buf += data
        return self._cut(final=False) if len(self._buf) >= self._window else []

    def finish(self) -> list[bytes]:
        return self._cut(final=True)

    def _cut(self, final: bool) -> list[bytes]:
        if not self._buf:
            return []
        # the buffer cannot be resized while a view of it is alive: release it even when interrupted (a signal
        # handler raising mid-cut), or the writes made while unwinding (tarfile's close) fail with BufferError
        with memoryview(self._buf) as view:
            cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(view)]
            if not final:
                cuts.pop()  # the last piece ends at the window's edge, not at a cut point
            chunks = [bytes(view[offset : offset + length]) for offset, length in cuts]
        del self._buf[: sum(length for _, length in cuts)]
        return chunks
