"""Content-defined chunking of a pushed stream, so plugins can ``write()`` while chunks are cut.

FastCDC decides a cut point from the bytes since the previous cut only, so cutting a sliding window and
holding back its last (unterminated) piece gives exactly the chunks of cutting the whole stream at once.
"""

from __future__ import annotations

from collections.abc import Iterator

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

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[bytes]:
        """Take more input; yield every chunk whose end is now certain."""
        self._buf += data
        if len(self._buf) >= self._window:
            yield from self._cut(final=False)

    def finish(self) -> Iterator[bytes]:
        yield from self._cut(final=True)

    def _cut(self, final: bool) -> Iterator[bytes]:
        if not self._buf:
            return
        # cut a bytes snapshot: the Cython chunks keep views into it, and a bytearray with live views
        # cannot be resized
        window = bytes(self._buf)
        cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(window)]
        if not final:
            cuts.pop()  # the last piece ends at the window's edge, not at a cut point
        for offset, length in cuts:
            yield window[offset : offset + length]
        consumed = cuts[-1][0] + cuts[-1][1] if cuts else 0
        del self._buf[:consumed]
