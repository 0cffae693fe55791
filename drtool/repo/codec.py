"""A chunk's stored body: zstd where a sample says it pays, the plaintext itself where it does not.

Compressing incompressible data costs about 0.3 CPU-s per GiB only to learn that raw is smaller, and
training checkpoints (float tensors) and container layers (already gzip'd) are mostly that. So each chunk
is judged by a 64 KiB sample from its middle: only when the sample shrinks below ``PAYS`` of its size is
the whole chunk compressed (and kept compressed only if that made it smaller). The choice is per chunk,
so an artifact that mixes text and tensors (a tar of a model folder) gets both, and it is recorded with
the chunk (format 1: a codec byte inside the sealed body; format 2: the codec field of the pack header
and index entry), so a reader never guesses (docs/store-format.md).
"""

from __future__ import annotations

import threading

import zstandard

from drtool.errors import IntegrityError

RAW, ZSTD = 0, 1
SAMPLE = 64 * 1024
PAYS = 0.9  # compress when the sample shrinks by at least 10 %


class Codec:
    """zstd at ``level`` with one context per thread (zstd contexts are not thread-safe)."""

    def __init__(self, level: int, max_size: int) -> None:
        self._level = level
        self._max_size = max_size
        self._local = threading.local()

    def _compressor(self) -> zstandard.ZstdCompressor:
        comp = getattr(self._local, "compressor", None)
        if comp is None:
            comp = self._local.compressor = zstandard.ZstdCompressor(level=self._level)
        return comp

    def encode(self, data: bytes | bytearray | memoryview) -> tuple[int, bytes | bytearray | memoryview]:
        """(codec, payload) for ``data``: compressed only when a sample says it pays and it did."""
        comp = self._compressor()
        if len(data) > 2 * SAMPLE:
            middle = len(data) // 2
            with memoryview(data) as view:
                if len(comp.compress(view[middle : middle + SAMPLE])) > PAYS * SAMPLE:
                    return RAW, data
        packed = comp.compress(data)
        return (ZSTD, packed) if len(packed) < len(data) else (RAW, data)

    def decode(self, codec: int, payload: bytes | memoryview, what: str) -> bytes | memoryview:
        if codec == RAW:
            return payload
        if codec != ZSTD:
            raise IntegrityError(f"{what} has unknown codec {codec}")
        try:
            return zstandard.ZstdDecompressor().decompress(payload, max_output_size=self._max_size)
        except zstandard.ZstdError as exc:
            raise IntegrityError(f"{what} does not decompress: {exc}") from None
