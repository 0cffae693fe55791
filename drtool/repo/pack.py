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

from drtool.crypto.master import PACK, MasterKey
from drtool.errors import IntegrityError

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
    """Blobs appended in order; ``finish`` gives the pack's bytes (header and trailer added)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.entries: list[BlobEntry] = []

    def __len__(self) -> int:
        return len(self.buffer)

    def add(self, chunk_id: str, codec: int, plain_length: int, blob: bytes | bytearray | memoryview) -> None:
        self.entries.append(BlobEntry(chunk_id, codec, len(self.buffer), len(blob), plain_length))
        self.buffer += blob

    def take(self, other: PackBuilder) -> None:
        """Append every blob of ``other`` (a stream's leftover pack joining the session's shared one)."""
        base = len(self.buffer)
        self.entries += [dataclasses.replace(e, offset=base + e.offset) for e in other.entries]
        self.buffer += other.buffer

    def finish(self, key: MasterKey, pack_id: str) -> bytearray:
        header = b"".join(
            HEADER_ENTRY.pack(e.codec, e.sealed_length, e.plain_length, bytes.fromhex(e.chunk_id)) for e in self.entries
        )
        sealed = key.seal(PACK, pack_id, header)
        self.buffer += sealed
        self.buffer += TRAILER.pack(len(sealed))
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
