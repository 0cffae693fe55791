"""A store in a local directory (or a mounted filesystem: NFS, a removable disk)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

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

    def endpoint(self) -> str:
        return ""

    def create(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._io_error("create", "the store directory", exc) from exc

    def _path(self, name: str) -> Path:
        if name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"invalid object name {name!r}")
        return self.root / name

    def _io_error(self, action: str, name: str, exc: OSError) -> StoreUnavailable:
        hint = "free space on the store's filesystem" if exc.errno == errno.ENOSPC else "check the store path"
        return StoreUnavailable(f"cannot {action} {name} in store {self.url}: {exc.strerror}", hint)

    def put(self, name: str, data: bytes, *, exclusive: bool = False) -> None:
        path = self._path(name)
        tmp_dir = self.root / _TMP
        log.debug("put %s (%d bytes%s)", path, len(data), ", exclusive" if exclusive else "")
        tmp = tmp_dir / f"{secrets.token_hex(8)}"
        try:
            if not self.root.is_dir():
                raise StoreUnavailable(f"store directory {self.url} does not exist", "run `drtool init` first")
            tmp_dir.mkdir(exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            path.parent.mkdir(parents=True, exist_ok=True)
            if exclusive:
                try:
                    os.link(tmp, path)  # atomic create-if-absent
                except FileExistsError:
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
