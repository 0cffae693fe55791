"""The store side of the data path alone: CPU seconds per GiB and peak RSS of a library-level backup and
restore into a local store (no S3, no plugin), four 64 MiB artifacts of random bytes written at once, as
the checkpoints plugin writes its shards. The peak RSS is the whole process's (the 64 MiB input included).

    python bench/data_path_cpu.py [--runs 3]

To compare with another commit, run the same file against that commit's package:

    git archive <commit> drtool | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python bench/data_path_cpu.py

Run it with ``MALLOC_ARENA_MAX=2`` (what the CLI sets) so peak RSS compares like for like.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import drtool
from drtool.backends.local import LocalBackend
from drtool.repo.config import StoreConfig
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession

MiB = 1 << 20
ARTIFACTS, SIZE = 4, 64 * MiB


def peak_rss_mib() -> int:
    status = open("/proc/self/status").read()  # noqa: SIM115 - read once
    return int(status.split("VmHWM:")[1].split()[0]) // 1024


def one_run(workdir: str, blob: bytes) -> tuple[float, float]:
    """(backup CPU-s per GiB, restore CPU-s per GiB)."""
    store = tempfile.mkdtemp(dir=workdir)
    try:
        backend = LocalBackend(os.path.join(store, "s"))
        repo = Repository.init(backend, passphrase="bench-passphrase", config=StoreConfig.new())
        c0 = time.process_time()
        with BackupSession(repo) as session:
            ctx = session.context_for("bench")

            def write(i: int) -> None:
                with ctx.artifact(f"a{i}") as sink:
                    for j in range(0, len(blob), MiB):
                        sink.write(blob[j : j + MiB])

            with ThreadPoolExecutor(ARTIFACTS) as pool:
                list(pool.map(write, range(ARTIFACTS)))
            manifest = session.commit()
        backup = time.process_time() - c0
        c0 = time.process_time()
        rctx = PluginRestoreContext(repo, manifest, "bench")
        for i in range(ARTIFACTS):
            with rctx.open(f"a{i}") as reader:
                while reader.read(MiB):
                    pass
        restore = time.process_time() - c0
        gib = ARTIFACTS * SIZE / (1 << 30)
        return backup / gib, restore / gib
    finally:
        shutil.rmtree(store)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args()
    blob = os.urandom(SIZE)
    runs = [one_run(args.workdir, blob) for _ in range(args.runs)]
    backup, restore = (statistics.median(column) for column in zip(*runs, strict=True))
    print(
        f"{os.path.dirname(os.path.dirname(drtool.__file__))}: backup {backup:.2f}, restore {restore:.2f} CPU-s/GiB "
        f"(medians of {args.runs}); process peak RSS {peak_rss_mib()} MiB; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
