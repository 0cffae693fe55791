"""The chunker's windows (drtool/repo/chunker.py): a source read straight into them cuts the same chunks as
writes do, and a window is reused for later input only once no chunk cut from it is alive, so a chunk still
being sealed never has its bytes overwritten."""

from __future__ import annotations

import io

from drtool.crypto.master import MasterKey
from drtool.repo.chunker import RETIRED, StreamChunker
from drtool.repo.config import ChunkerParams
from tests.fixtures.noise import noise

KIB = 1024
PARAMS = ChunkerParams(min_size=16 * KIB, avg_size=64 * KIB, max_size=256 * KIB)  # 512 KiB windows
DATA = noise(6 << 20, seed=31)  # a dozen windows


GEAR = MasterKey.generate("0123456789abcdef").gear()


def _chunker() -> StreamChunker:
    return StreamChunker(PARAMS, GEAR)


def test_reading_into_the_window_cuts_what_writes_cut() -> None:
    written = _chunker()
    by_write = [bytes(c) for i in range(0, len(DATA), 100 * KIB) for c in written.feed(DATA[i : i + 100 * KIB])]
    by_write += [bytes(c) for c in written.finish()]
    read = _chunker()
    source = io.BytesIO(DATA)
    by_read: list[bytes] = []
    while n := source.readinto(read.room()[: 100 * KIB]):
        by_read += [bytes(c) for c in read.filled(n)]
    by_read += [bytes(c) for c in read.finish()]
    assert [len(c) for c in by_read] == [len(c) for c in by_write]
    assert by_read == by_write and b"".join(by_read) == DATA


def test_a_window_is_reused_only_once_no_chunk_of_it_is_alive() -> None:
    chunker = _chunker()
    held = None  # the first chunk, kept as a sealing worker would keep it: its window must not be reused
    windows: list[int] = []  # the window object of every later chunk, in order
    copies: list[bytes] = []
    for i in range(0, len(DATA), 64 * KIB):
        for chunk in chunker.feed(DATA[i : i + 64 * KIB]):
            copies.append(bytes(chunk))
            if held is None:
                held, expected = chunk, bytes(chunk)
            else:
                windows.append(id(chunk.obj))
    copies += [bytes(c) for c in chunker.finish()]
    assert held is not None
    assert bytes(held) == expected, "a window was overwritten while a chunk of it was alive"
    assert id(held.obj) not in windows[-len(windows) // 2 :], "the held chunk's window was taken for later input"
    # a dozen windows of input in at most four: the one being filled, the retired ones, the pinned one
    assert len(set(windows)) <= 2 + RETIRED < len(DATA) // (2 * PARAMS.max_size), "windows were not reused"
    assert b"".join(copies) == DATA
