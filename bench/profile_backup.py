"""Where a drtool backup spends its time: cProfile of a library-level ``run_backup`` with the files plugin.

    python bench/profile_backup.py [--input FILE] [--size-mib 256] [--backend local|minio] [--top 25]

cProfile only sees the thread that enables it, and drtool seals and uploads chunks on a thread pool, so the
main thread (files plugin -> tar -> sink -> chunker) gets one profiler and every pool thread its own
(``BackupSession._store_chunk`` is wrapped here, drtool's code is unchanged); the worker profiles are merged.
Profiling slows pure-Python code far more than C code, so the profile shows *where* time goes and the
``--stages`` table (each stage alone on this machine's CPU, one thread and two) shows *how much* it costs.
Without ``--input`` it uses the etcd-like input of ``store_throughput.py`` (generated when missing).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from store_throughput import INPUT_SEED, RESULTS_DIR, MiB, MinioBackend, prepare_input, warm

from drtool.backends import Backend, open_backend
from drtool.backup import run_backup
from drtool.crypto.master import MasterKey
from drtool.plugin.manager import get_plugin
from drtool.repo.chunker import StreamChunker
from drtool.repo.config import ChunkerParams
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession

PASSPHRASE = "profile-backup"


def profiled_backup(source: Path, backend: Backend) -> tuple[float, cProfile.Profile, list[cProfile.Profile]]:
    """Run one backup of ``source`` into a new store; return wall time and the profiles."""
    repo = Repository.init(backend, passphrase=PASSPHRASE)
    workers: dict[int, cProfile.Profile] = {}
    lock = threading.Lock()
    original = BackupSession._store_chunk

    def store_chunk(self: BackupSession, data: bytes) -> tuple[str, int]:
        with lock:
            prof = workers.setdefault(threading.get_ident(), cProfile.Profile())
        prof.enable()
        try:
            return original(self, data)
        finally:
            prof.disable()

    BackupSession._store_chunk = store_chunk  # type: ignore[method-assign]
    main = cProfile.Profile()
    try:
        started = time.perf_counter()
        main.enable()
        run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(source)]}})
        main.disable()
        seconds = time.perf_counter() - started
    finally:
        BackupSession._store_chunk = original  # type: ignore[method-assign]
    return seconds, main, list(workers.values())


@contextmanager
def store_backend(kind: str, tmp: Path) -> Iterator[Backend]:
    """A new local store directory, or a new bucket on a lab MinIO (its AWS_* settings exported for boto3)."""
    if kind == "local":
        yield open_backend(str(tmp / "store"))
        return
    minio = MinioBackend(tmp / "lab")
    try:
        os.environ.update(minio.env())
        location = minio.new("profile")
        yield open_backend(location.drtool_url)
    finally:
        minio.close()


def top(profiles: list[cProfile.Profile], n: int, sort: str) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiles[0], stream=out)
    for extra in profiles[1:]:
        stats.add(extra)
    stats.strip_dirs().sort_stats(sort).print_stats(n)
    return out.getvalue()


def sample_chunks(source: Path, total: int) -> list[bytes]:
    """The first ``total`` bytes of ``source`` cut as drtool cuts them (default chunker parameters)."""
    chunker = StreamChunker(ChunkerParams(), MasterKey.generate("0123456789abcdef").gear())
    chunks: list[bytes] = []
    with open(source, "rb") as f:
        chunks.extend(chunker.feed(f.read(total)))
    chunks.extend(chunker.finish())
    return chunks


def stage_functions() -> dict[str, Callable[[bytes], Any]]:
    import zstandard
    from pyfastcdc import FastCDC

    key = MasterKey.generate("0123456789abcdef")
    compressors = threading.local()
    cdc = FastCDC(avg_size=1 << 20, min_size=256 << 10, max_size=4 << 20, normalized_chunking=1, seed=1)
    permutation, _ = key.gear()

    def compress(data: bytes) -> bytes:
        if not hasattr(compressors, "z"):
            compressors.z = zstandard.ZstdCompressor(level=3)
        return compressors.z.compress(data)

    return {
        "fastcdc cut_buf (pyfastcdc)": lambda data: sum(1 for _ in cdc.cut_buf(data)),
        "keyed gear table: byte permutation (bytes.translate)": lambda data: data.translate(permutation),
        "sha256 (artifact hash)": lambda data: hashlib.sha256(data).digest(),
        "blake2b-256 keyed (chunk id)": key.chunk_id,
        "zstd level 3": compress,
        "AES-256-GCM seal": lambda data: key.seal("chunk", "profile", data),
        "bytes copy": lambda data: memoryview(data).tobytes(),
    }


def stage_rates(chunks: list[bytes]) -> list[tuple[str, float, float]]:
    """MB/s of each stage alone: one thread, then two threads (does it release the GIL?)."""
    total = sum(len(c) for c in chunks)
    rates = []
    for name, fn in stage_functions().items():
        for c in chunks[:2]:
            fn(c)  # warm up
        started = time.perf_counter()
        for c in chunks:
            fn(c)
        one = total / (time.perf_counter() - started) / 1e6
        with ThreadPoolExecutor(2) as pool:
            started = time.perf_counter()
            list(pool.map(fn, chunks))
            two = total / (time.perf_counter() - started) / 1e6
        rates.append((name, one, two))
    return rates


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, help="file to back up (default: the etcd-like input)")
    parser.add_argument("--size-mib", type=int, default=256, help="size of the generated etcd-like input")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/drtool-store-bench"))
    parser.add_argument("--backend", choices=("local", "minio"), default="local", help="where the store lives")
    parser.add_argument("--top", type=int, default=25, help="functions to list per profile")
    parser.add_argument(
        "--stages", action=argparse.BooleanOptionalAction, default=True, help="also measure each pipeline stage alone"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.input:
        source = args.input
    else:
        args.workdir.mkdir(parents=True, exist_ok=True)
        source, _ = prepare_input(args.workdir, "etcd", args.size_mib * MiB)
    warm(source)
    size = source.stat().st_size
    with (
        tempfile.TemporaryDirectory(prefix="drtool-profile-") as tmp,
        store_backend(args.backend, Path(tmp)) as backend,
    ):
        seconds, main_prof, worker_profs = profiled_backup(source, backend)
    print(
        f"profiled backup of {source} ({size / MiB:.0f} MiB, seed {INPUT_SEED}) into a {args.backend} store: "
        f"{seconds:.1f} s wall "
        f"({size / seconds / 1e6:.0f} MB/s under the profiler), {len(worker_profs)} worker threads, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("== main thread (plugin -> tar -> ArtifactWriter -> chunker), by own time ==")
    print(top([main_prof], args.top, "tottime"))
    print("== chunk workers merged (id, dedup check, compress, seal, put), by own time ==")
    print(top(worker_profs, args.top, "tottime"))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    main_prof.dump_stats(RESULTS_DIR / f"profile-{args.backend}-main.pstats")
    pstats.Stats(*worker_profs).dump_stats(RESULTS_DIR / f"profile-{args.backend}-workers.pstats")
    if args.stages:
        chunks = sample_chunks(source, min(size, 256 * MiB))
        print(f"== each stage alone on {sum(map(len, chunks)) / MiB:.0f} MiB ({len(chunks)} chunks) ==")
        print(f"{'stage':32} {'1 thread MB/s':>14} {'2 threads MB/s':>15}")
        for name, one, two in stage_rates(chunks):
            print(f"{name:32} {one:14.0f} {two:15.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
