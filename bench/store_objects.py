"""Objects and requests per GiB stored, store format 1 (a chunk per object) against 2 (packs), same data.

Backs up ``--size-mib`` of random data into a fresh local store of each format through a backend that counts
every call (the calls are the requests an S3 store would get), then restores it. Prints a Markdown table.

    python bench/store_objects.py [--size-mib 1024]
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
from pathlib import Path
from typing import Any

from drtool.backends.local import LocalBackend
from drtool.crypto.credentials import Credentials
from drtool.repo.config import StoreConfig
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession

MiB = 1 << 20


class Counting(LocalBackend):
    """A local store that counts calls by kind (PUT, GET, ranged GET, HEAD, LIST)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: collections.Counter[str] = collections.Counter()

    def put(self, name: str, data: Any, *, exclusive: bool = False, write_once: bool = False) -> None:
        self.calls["PUT"] += 1
        super().put(name, data, exclusive=exclusive, write_once=write_once)

    def get(self, name: str) -> bytes:
        self.calls["GET"] += 1
        return super().get(name)

    def get_timed(self, name: str) -> Any:
        self.calls["GET"] += 1
        return super().get_timed(name)

    def get_range(self, name: str, start: int, length: int) -> bytes:
        self.calls["GET (range)"] += 1
        return super().get_range(name, start, length)

    def exists(self, name: str) -> bool:
        self.calls["HEAD"] += 1
        return super().exists(name)

    def size(self, name: str) -> int:
        self.calls["HEAD"] += 1
        return super().size(name)

    def list(self, prefix: str = ""):  # type: ignore[no-untyped-def]
        self.calls["LIST"] += 1
        return super().list(prefix)


def measure(version: int, data: bytes, root: Path) -> dict[str, Any]:
    backend = Counting(root / f"format{version}")
    repo = Repository.init(backend, passphrase="bench-passphrase", config=StoreConfig.new(version=version))
    backend.calls.clear()
    with BackupSession(repo) as session:
        with session.context_for("bench").artifact("data") as sink:
            for i in range(0, len(data), MiB):
                sink.write(data[i : i + MiB])
        manifest = session.commit()
    backup = dict(backend.calls)
    objects = sum(1 for _ in backend.list("chunks/")) + sum(1 for _ in backend.list("packs/"))
    objects += sum(1 for _ in backend.list("index/"))
    backend.calls.clear()
    fresh = Repository.open(backend, Credentials(passphrase="bench-passphrase"))
    ctx = PluginRestoreContext(fresh, manifest, "bench")
    ctx.preflight()
    with ctx.open("data") as reader:
        assert reader.read() == data
    return {"objects": objects, "backup": backup, "restore": dict(backend.calls)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    args = ap.parse_args()
    data = os.urandom(args.size_mib * MiB)
    gib = args.size_mib / 1024
    with tempfile.TemporaryDirectory() as tmp:
        rows = {v: measure(v, data, Path(tmp)) for v in (1, 2)}
    print("| per GiB | format 1 | format 2 | fewer |")
    print("|---|---|---|---|")

    def row(label: str, f: Any) -> None:
        a, b = f(rows[1]) / gib, f(rows[2]) / gib
        print(f"| {label} | {a:.0f} | {b:.0f} | {a / b:.1f}x |")

    row("objects stored", lambda r: r["objects"])
    row("backup requests (all)", lambda r: sum(r["backup"].values()))
    row("backup PUTs", lambda r: r["backup"].get("PUT", 0))
    row("restore requests (all, with preflight)", lambda r: sum(r["restore"].values()))
    print({v: r for v, r in rows.items()})


if __name__ == "__main__":
    main()
