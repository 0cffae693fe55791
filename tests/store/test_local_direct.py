"""Large objects in a local store are written past the page cache (drtool/backends/direct.py), byte for byte,
and where the filesystem refuses ``O_DIRECT`` they are written the ordinary way, whole."""

from __future__ import annotations

import errno
import fcntl
import os
import random
from pathlib import Path

import pytest

from drtool.backends import direct
from drtool.backends.local import LocalBackend

SIZES = [
    direct.DIRECT_MIN,  # whole blocks only
    direct.DIRECT_MIN + 1,  # one byte after the last block
    3 * direct.STAGE + direct.ALIGN - 1,  # several staging rounds and a tail of almost a block
    5 * direct.STAGE + 3 * direct.ALIGN,
]


def _spy_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    written: list[int] = []
    original = direct._write_blocks

    def spy(fd: int, view: memoryview) -> int:
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT
        written.append(original(fd, view))
        return written[-1]

    monkeypatch.setattr(direct, "_write_blocks", spy)
    return written


def test_large_objects_are_written_past_the_page_cache_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _spy_blocks(monkeypatch)
    backend = LocalBackend(tmp_path / "store")
    backend.create()
    rng = random.Random(41)
    blobs = {f"packs/{i}": rng.randbytes(size) for i, size in enumerate(SIZES)}
    for name, blob in blobs.items():
        backend.put(name, bytearray(blob), write_once=True)
    backend.put("small", b"x" * 100)
    assert written == [size // direct.ALIGN * direct.ALIGN for size in SIZES]  # the small one took the cache
    assert all(backend.get(name) == blob for name, blob in blobs.items()) and backend.get("small") == b"x" * 100
    assert backend._direct and not backend.leftover_temp_files()
    assert all(oct((tmp_path / "store" / name).stat().st_mode & 0o777) == "0o600" for name in blobs)


def test_where_direct_writes_are_refused_objects_are_written_whole_the_ordinary_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    calls = {"n": 0}

    def refuse_second_block(fd: int, data: memoryview) -> int:  # as a filesystem refusing mid-object would
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(direct.os, "write", refuse_second_block)
    backend = LocalBackend(tmp_path / "store")
    backend.create()
    first, second = random.Random(42).randbytes(3 * direct.STAGE + 5), random.Random(43).randbytes(direct.STAGE)
    backend.put("packs/a", first, write_once=True)
    assert not backend._direct  # refused once: the ordinary way from now on
    backend.put("packs/b", second, write_once=True)
    assert calls["n"] == 2 and backend.get("packs/a") == first and backend.get("packs/b") == second


def test_a_disk_error_under_a_direct_write_is_the_store_failing_not_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drtool.errors import StoreUnavailable

    def full(fd: int, data: memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(direct.os, "write", full)
    backend = LocalBackend(tmp_path / "store")
    backend.create()
    with pytest.raises(StoreUnavailable, match="No space left"):
        backend.put("packs/a", bytes(direct.DIRECT_MIN), write_once=True)
    assert backend._direct and not backend.exists("packs/a") and not backend.leftover_temp_files()
