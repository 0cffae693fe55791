"""Writing the files tar so that a file unchanged since the parent backup costs no read.

The way restic and Kopia decide: a file whose size, mtime and ctime (in ns), inode and device all equal
what the parent backup recorded is taken as unchanged, and its bytes are not read again. For that, each
large file's bytes start and end on a chunk boundary (``ArtifactSink.mark``), and the parent index records
which of the artifact's chunks hold them; a later backup writes the file's tar header, then splices those
chunks in (``ArtifactSink.splice``) instead of reading the file.

The index lives in the artifact's meta, so it is inside the sealed, authenticated manifest (never a
plaintext file on disk), and a parent is only used when its manifest authenticated, it belongs to the same
backup set and key generation (``BackupContext.previous_artifacts``), and it backed up the very same roots.
Files under ``SPLICE_MIN`` are always read: aligning them would cost two small chunks each, more than
reading them.

A file changed less than ``SETTLE_NS`` before the backup started (by its ctime, which every write and
metadata change moves) is not indexed, so the next backup reads it again: file systems stamp times from a
coarse clock (milliseconds on ext4, seconds elsewhere), and a second write within the same tick as the
one just read would leave size, mtime and ctime as they were (git calls such entries "racily clean").
"""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.plugin.contract import BackupContext

ARTIFACT = "files.tar"
IO_BLOCK = 1 << 20  # tar's default 10 KiB records cost a Python call per 10 KiB of a multi-GiB model
SPLICE_MIN = 1 << 20  # smaller files are read every time (see the module docstring)
SETTLE_NS = 2_000_000_000  # a file changed this recently is read again next time (see the module docstring)


def stat_key(st: os.stat_result) -> list[int]:
    """What must be equal for a file to count as unchanged."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class ParentIndex:
    """The parent backup's index of large files: arcname -> stat key + (first chunk, chunk count)."""

    def __init__(self, ctx: BackupContext, roots: list[str], force_read: bool) -> None:
        self.artifact: str | None = None
        self.files: Mapping[str, list[int]] = {}
        if force_read:
            return
        for art in ctx.previous_artifacts():
            index = art.meta.get("index")
            if art.name == ARTIFACT and art.meta.get("roots") == roots and isinstance(index, dict):
                self.artifact, self.files = art.name, index

    def chunks(self, arcname: str, key: list[int]) -> tuple[int, int] | None:
        entry = self.files.get(arcname)
        if isinstance(entry, list) and len(entry) == 7 and entry[:5] == key:
            return entry[5], entry[6]
        return None


class TreeWriter:
    """Writes roots into a tar on ``sink`` (an ``ArtifactSink``), splicing unchanged large files unread."""

    def __init__(self, sink: Any, parent: ParentIndex, task: Any) -> None:
        self._sink, self._parent, self._task = sink, parent, task
        self._offset = 0
        self._settled = time.time_ns() - SETTLE_NS  # ctimes before this are old enough to be trusted
        self.index: dict[str, list[int]] = {}
        self.stats = {"files_read": 0, "files_skipped": 0, "bytes_read": 0, "bytes_skipped": 0}

    # the file object tarfile writes to
    def write(self, data: bytes) -> int:
        self._task.advance(len(data))
        self._offset += len(data)
        return self._sink.write(data)

    def tell(self) -> int:
        return self._offset

    def write_roots(self, roots: Mapping[str, Path]) -> None:
        with tarfile.open(fileobj=self, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            tar.copybufsize = IO_BLOCK
            for arcname, path in roots.items():
                self._add(tar, str(path), arcname)

    def _add(self, tar: tarfile.TarFile, path: str, arcname: str) -> None:
        """What ``TarFile.add`` does (headers, hard links, sorted recursion), with large files aligned."""
        st = os.lstat(path)
        info = tar.gettarinfo(path, arcname)
        if info is None:
            return  # a socket: tar leaves it out too
        if info.isreg() and info.size >= SPLICE_MIN:
            self._add_large(tar, path, info, stat_key(st))
        elif info.isreg():
            with open(path, "rb") as f:
                tar.addfile(info, f)
            self._count("read", info.size)
        else:
            tar.addfile(info)
        if info.isdir():
            for name in sorted(os.listdir(path)):
                self._add(tar, os.path.join(path, name), os.path.join(arcname, name))

    def _add_large(self, tar: tarfile.TarFile, path: str, info: tarfile.TarInfo, key: list[int]) -> None:
        header = info.tobuf(tar.format, tar.encoding, tar.errors)
        self.write(header)
        start = self._sink.mark()
        hit = self._parent.chunks(info.name, key) if info.size == key[0] and self._parent.artifact else None
        if hit and self._sink.splice(self._parent.artifact, *hit):
            self._task.advance(info.size)
            self._offset += info.size
            count = hit[1]
            self._count("skipped", info.size)
        else:
            with open(path, "rb") as f:
                tarfile.copyfileobj(f, self, info.size, bufsize=IO_BLOCK)
            count = self._sink.mark() - start
            self._count("read", info.size)
        if key[2] < self._settled:
            self.index[info.name] = [*key, start, count]
        blocks, remainder = divmod(info.size, tarfile.BLOCKSIZE)
        if remainder:
            self.write(tarfile.NUL * (tarfile.BLOCKSIZE - remainder))
            blocks += 1
        tar.offset += len(header) + blocks * tarfile.BLOCKSIZE
        tar.members.append(info)

    def _count(self, how: str, size: int) -> None:
        self.stats[f"files_{how}"] += 1
        self.stats[f"bytes_{how}"] += size
