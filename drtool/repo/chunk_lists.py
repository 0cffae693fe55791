"""A manifest's chunk ids read straight from its JSON text, for prune.

Parsing a manifest through its model holds hundreds of bytes of Python objects per chunk reference while it
is parsed (a backup of 150,000 chunks: about 105 MB of RSS), the one part of prune's memory that still grew
with the store's largest backup (docs/performance.md, "Prune: the index and the mark set on disk"). Prune
needs only the set of ids, so ``ChunkListCut`` cuts each artifact's chunk list out of the decrypted JSON (as
``Manifest.encode`` writes it: ``[["<64 hex>",<length>],...]``), checks and decodes it with numpy (32 bytes
per id), and hands the model the rest.

Safety does not rest on the cut: a list that is not exactly in that form stays in the text the model parses,
and prune takes those ids from the model as before; a list cut elsewhere (a plugin's metadata shaped like an
artifact) only adds ids to the mark set, which keeps more chunks, never fewer. A list is cut only when every
byte of it is checked: a misread id would let prune delete a live chunk.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# where an artifact's chunk list starts: right after its sha256 (ArtifactEntry's field order)
_LIST_START = re.compile(rb'"sha256":"[0-9a-f]{64}","chunks":\[')
_OPEN, _CLOSE, _QUOTE, _COMMA = b'[]",'
_ID = 64  # hex digits
_DIGITS = 19  # a length's at most

_BLOCK = 1 << 20  # bytes counted at a time
_IDS = 4096  # ids decoded at a time: each step's arrays are 256 KiB


class ChunkListCut:
    """Called with a manifest's JSON, returns it with every chunk list it could read emptied; ``ids()`` then
    gives the ids those lists held (32-byte strings, in order, repeats kept)."""

    def __init__(self) -> None:
        self._ids: list[np.ndarray] = []

    def __call__(self, raw: bytes) -> bytes:
        """Linear in ``raw``: each byte is searched and checked once at most. A start inside a span already
        looked at is passed over, since a real list holds no other list's start (a manifest that is not as
        written then goes to the model whole): crafted text with many starts and no end cannot make it
        quadratic (tests/store/test_chunk_lists.py)."""
        pieces, kept_to, looked_to = [], 0, 0
        for match in _LIST_START.finditer(raw):
            start = match.end()  # the first pair's "[" (or the list's "]": nothing to cut)
            if start < looked_to or raw[start : start + 1] != b"[":
                continue
            last = raw.find(b"]]", start)  # the last pair's "]"
            looked_to = len(raw) if last < 0 else last + 1
            if last >= 0 and self._take(raw, start, last + 1):
                pieces.append(raw[kept_to:start])
                kept_to = last + 1
        return b"".join([*pieces, raw[kept_to:]]) if pieces else raw

    def ids(self) -> np.ndarray:
        return np.concatenate(self._ids) if self._ids else np.zeros(0, dtype="S32")

    def _take(self, raw: bytes, start: int, end: int) -> bool:
        """Decode ``raw[start:end]`` (``["<id>",<length>],...`` through the last ``]``) if every byte is as
        ``Manifest.encode`` writes it."""
        if raw.count(b"[", start, end) > (end - start + 1) // (_ID + 7):  # a pair and its comma: 71 bytes or more
            return False  # before positions are held: 8 bytes per "[" of a span full of them
        pairs = np.frombuffer(raw, np.uint8, end - start, start)
        opens, closes = _where(pairs, _OPEN), _where(pairs, _CLOSE)
        n = len(opens)
        if not n or len(closes) != n or opens[0] != 0 or closes[-1] != len(pairs) - 1:
            return False
        digits = closes - opens - (_ID + 4)  # '["' id '",' digits ']'
        if digits.min() < 1 or digits.max() > _DIGITS or np.any(opens[1:] != closes[:-1] + 2):
            return False
        del digits
        marks = ((opens, 1, _QUOTE), (opens, _ID + 2, _QUOTE), (opens, _ID + 3, _COMMA), (closes[:-1], 1, _COMMA))
        if any(np.any(pairs[at + offset] != byte) for at, offset, byte in marks):  # one index array at a time
            return False
        del closes
        # every other byte is a hex digit, and no hex letter is outside the ids: the lengths are decimal
        hex_digits = letters = 0
        for at in range(0, len(pairs), _BLOCK):
            block = raw[start + at : start + min(at + _BLOCK, len(pairs))]
            hex_digits += len(block) - len(block.translate(None, b"0123456789abcdef"))  # C, ~1 ms per MiB
            letters += np.count_nonzero(pairs[at : at + _BLOCK] > ord("`"))  # a-f once the count holds
        if hex_digits != len(pairs) - (6 * n - 1):
            return False
        windows, ids = sliding_window_view(pairs, _ID), []
        for at in range(0, n, _IDS):
            text = windows[opens[at : at + _IDS] + 2]  # lowercase hex digits, checked above
            letters -= np.count_nonzero(text > ord("`"))
            nibbles = (text & 15) + 9 * (text >> 6)  # '0'-'9': 0-9, 'a'-'f': 10-15
            ids.append(np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view("S32").ravel())
        if letters:
            return False
        self._ids += ids
        return True


def _where(text: np.ndarray, byte: int) -> np.ndarray:
    """The positions of ``byte`` in ``text``, searched a block at a time (no text-sized mask)."""
    found = [np.flatnonzero(text[at : at + _BLOCK] == byte) + at for at in range(0, len(text), _BLOCK)]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.intp)
