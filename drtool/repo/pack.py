"""Pack files (store format 2): many sealed chunks in one object, with a sealed header at the end.

Layout (docs/store-format.md, "Packs"; restic's pack format with drtool's sealing):

    blob_1 || ... || blob_n || sealed header || u32 little-endian length of the sealed header

Each blob is ``nonce || AES-256-GCM(chunk body)`` sealed on its own (kind ``blob``, named by its chunk id),
so prune can move a blob into another pack without opening it. The header lists, per blob in order,
``codec (u8) || sealed length (u32) || plaintext length (u32) || chunk id (32 bytes)``; offsets follow from
the lengths. It makes a pack self-describing: an index can be rebuilt, and a pack a killed backup uploaded
before writing its index is adopted by the next one (``PackedStore``).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable

from drtool.crypto.master import BLOB, PACK, SEAL_OVERHEAD, MasterKey
from drtool.errors import IntegrityError
from drtool.repo.chunks import Buffer

HEADER_ENTRY = struct.Struct("<BII32s")
TRAILER = struct.Struct("<I")


@dataclasses.dataclass(frozen=True)
class BlobEntry:
    """Where one chunk sits in its pack."""

    chunk_id: str
    codec: int
    offset: int
    sealed_length: int
    plain_length: int


class PackBuilder:
    """Blobs appended in order into one buffer; ``finish`` gives the pack's bytes (header and trailer added).

    The buffer holds ``capacity`` bytes (the writer's target plus one largest blob) from the first blob on:
    appending a chunk at a time to a growing bytearray reallocates and copies it a dozen times on the way to
    16 MiB. A writer hands in the buffers of packs it uploaded (``spare``, taken when the first blob comes): a
    fresh 20 MiB buffer costs page faults and zeroing, 0.2 CPU-s per GiB here. New chunks are sealed straight
    into the buffer (``seal``), so a stored byte is encrypted once and never copied after.
    """

    def __init__(self, capacity: int = 0, spare: Callable[[], bytearray | None] | None = None) -> None:
        self.buffer = bytearray()
        self.entries: list[BlobEntry] = []
        self._capacity = capacity
        self._spare = spare
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _reserve(self, n: int) -> None:
        """Room for ``n`` more bytes; grows (a copy) only past the capacity: a header of thousands of blobs."""
        need = self._size + n
        if need <= len(self.buffer):
            return
        if not self.buffer:
            self.buffer = (self._spare and self._spare()) or bytearray(max(need, self._capacity))
        if need > len(self.buffer):  # a recycled buffer keeps its allocation: no copy unless it grows past it
            self.buffer += bytes(max(need, self._capacity) - len(self.buffer))

    def _append(self, chunk_id: str, codec: int, plain_length: int, length: int) -> memoryview:
        self._reserve(length)
        self.entries.append(BlobEntry(chunk_id, codec, self._size, length, plain_length))
        self._size += length
        return memoryview(self.buffer)[self._size - length : self._size]

    def add(self, chunk_id: str, codec: int, plain_length: int, blob: bytes | bytearray | memoryview) -> None:
        """Append a blob sealed earlier (prune copies live blobs into new packs as they are)."""
        with self._append(chunk_id, codec, plain_length, len(blob)) as room:
            room[:] = blob

    def seal(self, key: MasterKey, chunk_id: str, codec: int, plain_length: int, body: Buffer) -> None:
        """Seal a chunk's body (its plaintext or zstd frame) into the pack."""
        with self._append(chunk_id, codec, plain_length, len(body) + SEAL_OVERHEAD) as room:
            key.seal_into(BLOB, chunk_id, body, room)

    def take(self, other: PackBuilder) -> None:
        """Append every blob of ``other`` (a stream's leftover pack joining the session's shared one)."""
        base = self._size
        self._reserve(other._size)
        self.buffer[base : base + other._size] = memoryview(other.buffer)[: other._size]
        self._size += other._size
        self.entries += [dataclasses.replace(e, offset=base + e.offset) for e in other.entries]

    def finish(self, key: MasterKey, pack_id: str) -> bytearray:
        header = b"".join(
            HEADER_ENTRY.pack(e.codec, e.sealed_length, e.plain_length, bytes.fromhex(e.chunk_id)) for e in self.entries
        )
        sealed = key.seal(PACK, pack_id, header)
        tail = sealed + TRAILER.pack(len(sealed))
        self._reserve(len(tail))
        self.buffer[self._size : self._size + len(tail)] = tail
        self._size += len(tail)
        del self.buffer[self._size :]  # the capacity left unused
        return self.buffer


def parse_header(key: MasterKey, pack_id: str, tail: bytes, pack_size: int) -> list[BlobEntry]:
    """The entries of a pack from its last bytes (``tail`` must hold the whole sealed header and trailer)."""
    if len(tail) < TRAILER.size:
        raise IntegrityError(f"pack {pack_id[:12]} is truncated")
    (length,) = TRAILER.unpack(tail[-TRAILER.size :])
    if length + TRAILER.size > len(tail):
        raise IntegrityError(f"pack {pack_id[:12]} has a header longer than itself ({length} bytes)")
    header = key.unseal(PACK, pack_id, bytes(tail[-TRAILER.size - length : -TRAILER.size]))
    if len(header) % HEADER_ENTRY.size:
        raise IntegrityError(f"pack {pack_id[:12]} has a malformed header")
    entries, offset = [], 0
    for codec, sealed, plain, raw_id in HEADER_ENTRY.iter_unpack(header):
        entries.append(BlobEntry(raw_id.hex(), codec, offset, sealed, plain))
        offset += sealed
    if offset + length + TRAILER.size != pack_size:
        raise IntegrityError(f"pack {pack_id[:12]}: its header does not account for its size")
    return entries


def header_length(tail: bytes) -> int:
    """Bytes at the end of a pack that hold its sealed header and trailer (from the trailer alone)."""
    return TRAILER.unpack(tail[-TRAILER.size :])[0] + TRAILER.size
