"""The keyed gear table written into pyfastcdc's chunker, so keyed chunking costs no extra pass over the bytes.

A store's chunker cuts where FastCDC cuts with the table ``GEAR[perm[b]] ^ seed`` (``MasterKey.gear``).
pyfastcdc takes a seed, not a table, so the chunker used to translate every window through the permutation
first and cut the translated copy: ``bytes.translate`` cost 0.67 CPU-s per GiB on the machine of
docs/performance.md, more than FastCDC itself (0.26), with the GIL held, and one more window-sized copy.

pyfastcdc 0.3 builds a seeded chunker's two tables (``GEAR[b] ^ seed`` and ``GEAR_LS[b] ^ seed << 1``) in two
arrays of 256 words it allocates for that chunker alone and points its config at them. ``keyed_fastcdc``
writes the keyed tables into those arrays, after checking that the object has exactly pyfastcdc 0.3's layout
(its size, the sizes it was made with, each table pointer equal to its owner pointer) and that the arrays
hold exactly the seeded tables; once per process it also cuts a sample both ways (``_installs_correctly``).
Where any check fails (another pyfastcdc), it returns a seeded chunker and the permutation to translate
with, as before: the cut points are the same either way, only the cost differs. Nothing is written into
memory that the checks did not identify, and the static tables pyfastcdc shares between chunkers (those of
a seed of 0) are never touched: a keyed seed is never 0.
"""

from __future__ import annotations

import ctypes
import random
import threading

from pyfastcdc import FastCDC
from pyfastcdc.py.constants import GEAR, GEAR_LS

from drtool.repo.config import ChunkerParams

WORDS = 256
U64 = (1 << 64) - 1
# pyfastcdc 0.3's FastCDC object: PyObject header (2 words), its config (sizes: 3 x u32 and padding; four
# masks; the two table pointers) and the two pointers to the tables it allocated for a seed
_BASICSIZE = 96
_SIZES = slice(2, 4)  # words holding avg_size | min_size << 32, then max_size
_GEAR, _GEAR_LS, _HOLDER, _HOLDER_LS = 8, 9, 10, 11
_SAMPLE_SEED = 20261205

_checked: bool | None = None
_check_lock = threading.Lock()


def keyed_fastcdc(params: ChunkerParams, permutation: bytes | None, seed: int) -> tuple[FastCDC, bytes | None]:
    """A FastCDC that cuts with ``GEAR[perm[b]] ^ seed``, and the permutation the caller must still translate
    its input with (None when the table is installed, or when there is no permutation)."""
    cdc = _seeded(params, seed)
    if permutation is None or not _installs_correctly() or not _install(cdc, params, permutation, seed):
        return cdc, permutation
    return cdc, None


def _seeded(params: ChunkerParams, seed: int) -> FastCDC:
    return FastCDC(
        avg_size=params.avg_size,
        min_size=params.min_size,
        max_size=params.max_size,
        normalized_chunking=params.normalized_chunking,
        seed=seed,
    )


def _install(cdc: FastCDC, params: ChunkerParams, permutation: bytes, seed: int) -> bool:
    """Write the keyed tables into ``cdc``'s own tables; False (nothing written) unless the layout checks."""
    if type(cdc).__basicsize__ != _BASICSIZE or not 0 < seed <= U64 or sorted(permutation) != list(range(WORDS)):
        return False
    words = (ctypes.c_uint64 * (_BASICSIZE // 8)).from_address(id(cdc))
    sizes = [params.avg_size | params.min_size << 32, params.max_size]
    if list(words[_SIZES]) != sizes or not words[_GEAR] or words[_GEAR] % 8 or words[_GEAR_LS] % 8:
        return False
    if words[_GEAR] != words[_HOLDER] or words[_GEAR_LS] != words[_HOLDER_LS] or words[_GEAR] == words[_GEAR_LS]:
        return False
    gear = (ctypes.c_uint64 * WORDS).from_address(words[_GEAR])
    gear_ls = (ctypes.c_uint64 * WORDS).from_address(words[_GEAR_LS])
    seed_ls = seed << 1 & U64
    if list(gear) != [g ^ seed for g in GEAR] or list(gear_ls) != [g ^ seed_ls for g in GEAR_LS]:
        return False
    gear[:] = [GEAR[p] ^ seed for p in permutation]
    gear_ls[:] = [GEAR_LS[p] ^ seed_ls for p in permutation]
    return True


def _installs_correctly() -> bool:
    """Once per process: whether an installed table cuts a sample exactly where translating it does."""
    global _checked
    with _check_lock:
        if _checked is None:
            rng = random.Random(_SAMPLE_SEED)
            params = ChunkerParams(avg_size=4096, min_size=1024, max_size=16384)
            permutation, seed = bytes(rng.sample(range(WORDS), WORDS)), rng.getrandbits(63) | 1
            sample = rng.randbytes(256 * 1024)
            installed = _seeded(params, seed)
            if _install(installed, params, permutation, seed):
                translated = sample.translate(permutation)
                expected = [(c.offset, c.length) for c in _seeded(params, seed).cut_buf(translated)]
                _checked = [(c.offset, c.length) for c in installed.cut_buf(sample)] == expected
            else:
                _checked = False
        return _checked
