"""The keyed gear table written into pyfastcdc (drtool/repo/gear.py) cuts exactly where the store format says.

A store's chunk boundaries are those of FastCDC with the table ``GEAR[perm[b]] ^ seed``, defined as cutting
the input translated through the permutation with a seeded FastCDC (docs/store-format.md): every chunk id an
existing store deduplicates against depends on it. These tests hold the installed table to that definition,
and check that the installed path is the one taken (no translated copy) and that it never writes where the
layout checks fail.
"""

from __future__ import annotations

import ctypes
import random

import pytest
from pyfastcdc import FastCDC

from drtool.crypto.master import MasterKey
from drtool.repo import gear
from drtool.repo.chunker import StreamChunker
from drtool.repo.config import ChunkerParams

MIB = 1 << 20


def _by_definition(params: ChunkerParams, permutation: bytes, seed: int, data: bytes) -> list[int]:
    cdc = FastCDC(
        avg_size=params.avg_size,
        min_size=params.min_size,
        max_size=params.max_size,
        normalized_chunking=params.normalized_chunking,
        seed=seed,
    )
    return [c.length for c in cdc.cut_buf(data.translate(permutation))]


def _streamed(chunker: StreamChunker, data: bytes, write: int) -> list[int]:
    lengths = []
    for i in range(0, len(data), write):
        lengths += [len(c) for c in chunker.feed(data[i : i + write])]
    return lengths + [len(c) for c in chunker.finish()]


@pytest.mark.parametrize("params", [ChunkerParams(), ChunkerParams(min_size=2048, avg_size=8192, max_size=65536)])
def test_the_installed_table_cuts_where_the_translated_input_does(params: ChunkerParams) -> None:
    permutation, seed = MasterKey.generate("0123456789abcdef").gear()
    data = random.Random(31).randbytes(40 * MIB if params.avg_size == MIB else 2 * MIB)
    chunker = StreamChunker(params, (permutation, seed))
    assert chunker._permutation is None  # the table is pyfastcdc's own: no window is translated
    expected = _by_definition(params, permutation, seed, data)
    assert len(expected) > 20
    assert _streamed(chunker, data, 1 * MIB + 7) == expected


def test_where_the_table_cannot_be_installed_the_input_is_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gear, "_checked", False)  # as if the sample cut differently (another pyfastcdc)
    params = ChunkerParams(min_size=2048, avg_size=8192, max_size=65536)
    permutation, seed = MasterKey.generate("0123456789abcdef").gear()
    data = random.Random(32).randbytes(MIB)
    chunker = StreamChunker(params, (permutation, seed))
    assert chunker._permutation == permutation
    assert _streamed(chunker, data, 100_000) == _by_definition(params, permutation, seed, data)


def test_nothing_is_written_where_the_layout_does_not_check() -> None:
    params = ChunkerParams()
    permutation = bytes(reversed(range(256)))
    shared = FastCDC(avg_size=params.avg_size, min_size=params.min_size, max_size=params.max_size, seed=0)
    address = (ctypes.c_uint64 * 12).from_address(id(shared))[8]  # seed 0: pyfastcdc's static table
    before = bytes((ctypes.c_char * 2048).from_address(address))
    assert not gear._install(shared, params, permutation, 0)
    other = ChunkerParams(min_size=128 * 1024, avg_size=MIB, max_size=4 * MIB)
    seeded = FastCDC(avg_size=MIB, min_size=256 * 1024, max_size=4 * MIB, seed=5)
    assert not gear._install(seeded, other, permutation, 5)  # not the sizes it was made with
    assert not gear._install(seeded, params, permutation[:-1] + permutation[:1], 5)  # not a permutation
    assert bytes((ctypes.c_char * 2048).from_address(address)) == before
    data = random.Random(33).randbytes(8 * MIB)
    assert [c.length for c in seeded.cut_buf(data)] == _by_definition(params, bytes(range(256)), 5, data)
