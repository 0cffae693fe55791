"""A store in a local directory (or a mounted filesystem: NFS, a removable disk).

Folders are made 0700 and objects 0600, each created with ``O_EXCL`` aside in ``.tmp/`` and linked into
place, so a write never follows a planted link and never replaces an object unless asked to. An object's
server-set time is its file's birth time (drtool/backends/birth.py): ``chmod``, ``chown``, ``touch``,
``utime`` and renames do not move it, as they move the change time. Only where the filesystem keeps no birth
time is the change time used. Copying a store (``cp -a``, ``rsync -a``, a restore from tape) makes new files
with new birth times; docs/threat-model.md says what that means for backup times.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

from drtool.backends import direct
from drtool.backends.birth import birth_time
from drtool.errors import NotFound, ObjectExists, StoreUnavailable

log = logging.getLogger(__name__)

_TMP = ".tmp"


class LocalBackend:
    """Objects are files; writes go to ``.tmp/`` then are linked into place, so readers never see half a file."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
        self.url = str(self.root)
        self._unsynced: set[Path] = set()  # directories with new entries not yet fsynced
        self._unsynced_lock = threading.Lock()
        self._direct = direct.supported()  # large objects past the page cache (drtool/backends/direct.py)

    def endpoint(self) -> str:
        return ""

    def create(self) -> None:
        try:
            self.root.parent.mkdir(parents=True, exist_ok=True)
            self.root.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise self._io_error("create", "the store directory", exc) from exc

    def _path(self, name: str) -> Path:
        if name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"invalid object name {name!r}")
        return self.root / name

    def _io_error(self, action: str, name: str, exc: OSError) -> StoreUnavailable:
        hint = "free space on the store's filesystem" if exc.errno == errno.ENOSPC else "check the store path"
        return StoreUnavailable(f"cannot {action} {name} in store {self.url}: {exc.strerror}", hint)

    def put(self, name: str, data: bytes, *, exclusive: bool = False, write_once: bool = False) -> None:
        path = self._path(name)
        tmp_dir = self.root / _TMP
        log.debug("put %s (%d bytes%s)", path, len(data), ", exclusive" if exclusive else "")
        tmp = tmp_dir / f"{secrets.token_hex(8)}"
        try:
            if not self.root.is_dir():
                raise StoreUnavailable(f"store directory {self.url} does not exist", "run `drtool init` first")
            tmp_dir.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                if not self._write_direct(fd, data):
                    f.write(data)
                    f.flush()
                os.fsync(f.fileno())
            self._folders(path.parent)
            if exclusive or write_once:
                try:
                    os.link(tmp, path)  # atomic create-if-absent
                except FileExistsError:
                    if exclusive:
                        raise ObjectExists(f"{name} already exists in store {self.url}") from None
                os.unlink(tmp)
            else:
                os.replace(tmp, path)
            if exclusive:
                _fsync_dir(path.parent)
            else:
                with self._unsynced_lock:
                    self._unsynced.add(path.parent)
        except OSError as exc:
            _unlink_quietly(tmp)
            raise self._io_error("write", name, exc) from exc
        except BaseException:
            _unlink_quietly(tmp)
            raise

    def _write_direct(self, fd: int, data: bytes) -> bool:
        """A large object written past the page cache; False when it is small or the filesystem refuses
        (then never tried again by this backend): the caller writes it the ordinary way."""
        if not self._direct or len(data) < direct.DIRECT_MIN:
            return False
        self._direct = direct.write(fd, data)
        return self._direct

    def _folders(self, folder: Path) -> None:
        """Make ``folder`` and any missing parent below the store root, each 0700."""
        missing = []
        while not folder.is_dir() and folder != self.root:
            missing.append(folder)
            folder = folder.parent
        for each in reversed(missing):
            with contextlib.suppress(FileExistsError):  # another writer made it first
                each.mkdir(mode=0o700)

    def sync(self) -> None:
        with self._unsynced_lock:
            pending, self._unsynced = self._unsynced, set()
        try:
            for directory in sorted(pending):
                _fsync_dir(directory)
        except OSError as exc:
            raise self._io_error("flush", str(directory), exc) from exc

    def get(self, name: str) -> bytes:
        log.debug("get %s", self._path(name))
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"{name} not found in store {self.url}") from None
        except OSError as exc:
            raise self._io_error("read", name, exc) from exc

    def get_range(self, name: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(name), "rb") as f:
                f.seek(start)
                return f.read(length)
        except FileNotFoundError:
            raise NotFound(f"{name} not found in store {self.url}") from None
        except OSError as exc:
            raise self._io_error("read", name, exc) from exc

    def get_timed(self, name: str) -> tuple[bytes, dt.datetime]:
        try:
            with open(self._path(name), "rb") as f:
                return f.read(), _received(os.fstat(f.fileno()), birth_time(fd=f.fileno()))
        except FileNotFoundError:
            raise NotFound(f"{name} not found in store {self.url}") from None
        except OSError as exc:
            raise self._io_error("read", name, exc) from exc

    def list_timed(self, prefix: str = "") -> Iterator[tuple[str, dt.datetime]]:
        for name in self.list(prefix):
            with contextlib.suppress(FileNotFoundError):  # deleted since it was listed
                path = self._path(name)
                yield name, _received(path.stat(), birth_time(path))

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def size(self, name: str) -> int:
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            raise NotFound(f"{name} not found in store {self.url}") from None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Names starting with ``prefix`` as a plain string (as on S3): "a" matches "a/1", "ab" and "abc/x"."""
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self._path(folder) if folder else self.root
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            dirnames[:] = [d for d in dirnames if d != _TMP and _may_hold(rel_dir + d + "/", prefix)]
            for fn in filenames:
                if (rel_dir + fn).startswith(prefix):
                    yield rel_dir + fn

    def delete(self, name: str) -> None:
        log.debug("delete %s", self._path(name))
        _unlink_quietly(self._path(name))

    def leftover_temp_files(self) -> list[str]:
        """Temp files left by a writer that was killed; safe to delete when no writer runs."""
        tmp_dir = self.root / _TMP
        return sorted(p.name for p in tmp_dir.iterdir()) if tmp_dir.is_dir() else []


def _received(stat: os.stat_result, born: dt.datetime | None) -> dt.datetime:
    """The birth time, or the change time where the filesystem keeps none (never the modification time,
    which ``touch -d`` sets to anything)."""
    return born or dt.datetime.fromtimestamp(stat.st_ctime, dt.UTC)


def _may_hold(folder: str, prefix: str) -> bool:
    """Whether names under ``folder`` (ending in "/") can start with ``prefix``."""
    return folder.startswith(prefix) or prefix.startswith(folder)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
