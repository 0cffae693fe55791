"""`drtool prune` on a format-2 store of 100k and 1M chunks: wall time, CPU seconds and peak RSS.

The store is generated through drtool's own write path (``BackupSession`` and the pack writer: real chunk
ids, sealing, packs, index objects and manifests), at the chunk level: ``--chunk-size`` bytes of random data
per chunk (1 KiB, so a million chunks is about 1 GiB), because the chunker's 256 KiB minimum would make a
million chunks 256 GiB. ``--backups`` backups into one set each store a share of the chunks, and each backup
after the first also names every other chunk of the one before it (by reference, as a plugin's unchanged
artifact would be). Even-numbered backups carry the tag ``keep``; the set's policy is ``keep_last: 1`` with
``keep_tags: [keep]``, so prune forgets every other backup: half of each forgotten backup's own chunks die,
spread over all of its packs, which prune must then repack (the expensive case), not merely delete.

A generated store is cached under ``--workdir``, keyed by its parameters, with its catalog synced (as on an
operator's machine after the backups); each run prunes a hard-linked copy (every store write is a new file
renamed into place, so the cache is never changed). ``drtool prune --json`` runs as a child process, as an
operator runs it; its wall time, CPU seconds and peak RSS (VmHWM, polled) are recorded with the load
average. With ``--backend minio`` the copy is uploaded object by object into a bucket of a lab MinIO and
pruned there.

    nice python bench/prune_scale.py --chunks 100000 --runs 3
    nice python bench/prune_scale.py --chunks 1000000 --runs 1

To measure another commit's prune on the same cached stores, put its package first on the path and run
from another directory (the working directory comes first on ``sys.path``, before ``PYTHONPATH``):

    git archive <commit> drtool | tar -x -C /tmp/old && cd /tmp && PYTHONPATH=/tmp/old python $REPO/bench/prune_scale.py

Results go to bench/results/prune-scale-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from machine import REPO, load, machine_facts, popen_measured

from drtool.backends.local import LocalBackend
from drtool.repo.manifest import ArtifactEntry, PluginOutcome, utc_now
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession

MiB = 1 << 20
PASS = "bench-passphrase"
SET = "bench"
POLICY = {"keep_last": 1, "keep_tags": ["keep"]}
GENERATOR = 1  # bump when the generated store changes shape: old cached stores are then not reused


def artifact(name: str, data: list[memoryview], chunks: list[tuple[str, int]]) -> ArtifactEntry:
    sha = hashlib.sha256()
    for piece in data:
        sha.update(piece)
    size = sum(length for _, length in chunks)
    return ArtifactEntry(plugin="files", name=name, size=size, sha256=sha.hexdigest(), chunks=chunks)


def generate(root: Path, chunks: int, backups: int, chunk_size: int) -> None:
    """A format-2 store at ``root`` holding ``chunks`` distinct chunks over ``backups`` backups."""
    repo = Repository.init(LocalBackend(root), passphrase=PASS)
    per = chunks // backups
    previous: tuple[list[memoryview], list[tuple[str, int]]] | None = None
    for i in range(backups):
        t0 = time.perf_counter()
        view = memoryview(np.random.default_rng(i).bytes(per * chunk_size))
        pieces = [view[k : k + chunk_size] for k in range(0, len(view), chunk_size)]
        tags = ["keep"] if i % 2 == 0 else []
        with BackupSession(repo, backup_set=SET, tags=tags) as session:
            started = utc_now()
            stream = session.chunks.stream()
            for piece in pieces:
                stream.add(piece)
            refs = stream.finish()
            session.artifacts.append(artifact("new", pieces, refs))
            if previous is not None:  # every other chunk of the previous backup, by reference
                old_pieces, old_refs = previous
                session.artifacts.append(artifact("carried", old_pieces[::2], old_refs[::2]))
            session.outcomes["files"] = PluginOutcome(status="ok", started=started, finished=utc_now())
            manifest = session.commit()
        previous = pieces, refs
        print(f"  backup {i + 1}/{backups} {manifest.id}: {per} chunks, {time.perf_counter() - t0:.1f} s", flush=True)


def cached_store(work: Path, chunks: int, backups: int, chunk_size: int, env: dict[str, str]) -> Path:
    """The generated store's directory (with ``catalog.db`` beside ``store/``), generated once per parameters."""
    cache = work / f"store-g{GENERATOR}-c{chunks}-b{backups}-s{chunk_size}"
    if (cache / "complete").exists():
        return cache
    shutil.rmtree(cache, ignore_errors=True)
    partial = Path(tempfile.mkdtemp(dir=work, prefix="generating-"))
    print(f"generating {chunks} chunks in {backups} backups into {cache}", flush=True)
    t0 = time.perf_counter()
    generate(partial / "store", chunks, backups, chunk_size)
    genv = env | {"DRTOOL_STORE": str(partial / "store"), "DRTOOL_CATALOG": str(partial / "catalog.db")}
    subprocess.run([sys.executable, "-m", "drtool", "catalog", "rebuild"], env=genv, check=True, capture_output=True)
    (partial / "complete").write_text(f"{time.perf_counter() - t0:.1f}\n")
    partial.rename(cache)
    print(f"generated in {time.perf_counter() - t0:.0f} s", flush=True)
    return cache


def count(root: Path, folder: str) -> int:
    return sum(1 for p in (root / folder).rglob("*") if p.is_file())


def upload(client: Any, store: Path, bucket: str) -> None:
    """The store's objects, byte for byte, into ``bucket`` (both backends hold the same format)."""
    files = [p for p in store.rglob("*") if p.is_file() and ".tmp" not in p.relative_to(store).parts]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: client.upload_file(str(p), bucket, str(p.relative_to(store))), files))


def bucket_count(client: Any, bucket: str, prefix: str) -> int:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sum(len(page.get("Contents", [])) for page in pages)


def run_once(cache: Path, run_dir: Path, env: dict[str, str], minio: Any, run: int) -> dict[str, Any]:
    """Prune a copy of the cached store once; the figures of that run."""
    store = run_dir / "store"
    subprocess.run(["cp", "-al", str(cache / "store"), str(store)], check=True)
    shutil.copy(cache / "catalog.db", run_dir / "catalog.db")
    url = str(store)
    if minio is not None:
        bucket = f"prune-{run}-{os.getpid()}"
        minio.create_bucket(bucket)
        upload(minio.client(), store, bucket)
        url = f"s3://{bucket}"
    config = run_dir / "config.yaml"
    sets = {SET: {"plugins": ["files"], "cron": "0 3 * * *", "retention": POLICY}}
    # the store times of a copy are when it was copied, not when its backups were written: without a wide
    # skew, every manifest would be flagged as back-dated and kept (docs/retention.md), and nothing pruned
    settings = {"store": url, "backup_sets": sets, "max_clock_skew": "3650d"}
    config.write_text(yaml.safe_dump(settings))
    renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(run_dir / "catalog.db")}

    def objects(folder: str) -> int:
        return bucket_count(minio.client(), bucket, folder) if minio is not None else count(store, folder)

    before = {f: objects(f) for f in ("packs/", "index/", "manifests/")}
    load_before = load()
    wall, rss, out, cpu = popen_measured([sys.executable, "-m", "drtool", "prune", "--json"], renv)
    report = json.loads(out)
    after = {f: objects(f) for f in ("packs/", "index/", "manifests/")}
    if report["flagged"] or not report["forgotten"]:
        raise SystemExit(f"prune forgot nothing: {len(report['flagged'])} manifest(s) flagged")
    if report["chunks_present"] != report["chunks_referenced"]:
        raise SystemExit(f"prune left {report['chunks_present']} indexed of {report['chunks_referenced']} live")
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_bytes": rss,
        "load_before": load_before,
        "load_after": load(),
        "objects_before": before,
        "objects_after": after,
        "report": {k: v for k, v in report.items() if k != "decisions"},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--backups", type=int, default=10)
    ap.add_argument("--chunk-size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", choices=["local", "minio"], default="local")
    ap.add_argument("--workdir", default="/work/tmp-bench-prune-scale")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    env = {**os.environ, "DRTOOL_PASSPHRASE": PASS, "HOME": str(home), "DRTOOL_STATE_DIR": str(home / "state")}
    lab = minio = None
    if args.backend == "minio":
        from drtool_lab.lab import Lab

        labs = Path(tempfile.mkdtemp(dir=work, prefix="labs-"))
        env["DRTOOL_LAB_DIR"] = os.environ["DRTOOL_LAB_DIR"] = str(labs)
        lab = Lab("bench", root=labs)
        lab.up(["minio"])
        minio = lab["minio"]
        env |= minio.env()
    results: dict[str, Any] = {"machine": machine_facts(), "args": vars(args), "sizes": {}}
    try:
        for chunks in args.chunks:
            cache = cached_store(work, chunks, args.backups, args.chunk_size, env)
            runs = []
            for r in range(args.runs):
                run_dir = Path(tempfile.mkdtemp(dir=work, prefix="run-"))
                try:
                    runs.append(run_once(cache, run_dir, env, minio, r))
                finally:
                    shutil.rmtree(run_dir, ignore_errors=True)
                last = runs[-1]
                print(
                    f"{chunks} chunks, run {r + 1}: {last['wall_s']:.1f} s, {last['cpu_s']:.1f} CPU-s, "
                    f"peak RSS {last['peak_rss_bytes'] / MiB:.0f} MiB, load {last['load_before']:.1f}",
                    flush=True,
                )
            results["sizes"][chunks] = {
                "generation_s": float((cache / "complete").read_text()),
                "store_bytes": sum(p.stat().st_size for p in (cache / "store").rglob("*") if p.is_file()),
                "median_wall_s": statistics.median(r["wall_s"] for r in runs),
                "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "max_peak_rss_MiB": max(r["peak_rss_bytes"] for r in runs) / MiB,
                "runs": runs,
            }
        print(json.dumps({k: {n: v for n, v in s.items() if n != "runs"} for k, s in results["sizes"].items()}))
        out_dir = REPO / "bench" / "results"
        out_dir.mkdir(exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        (out_dir / f"prune-scale-{stamp}.json").write_text(json.dumps(results, indent=2))
    finally:
        if lab is not None:
            lab.down()


if __name__ == "__main__":
    main()
