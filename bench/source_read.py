"""Reading one large checkpoint object from MinIO, the way a backup reads it: one GET stream against
parallel ranged GETs (docs/checkpoints.md, "Large objects"), with nothing else in the way.

bench/checkpoints.py measures the whole backup, where chunking, encryption and the store's uploads share
the two cores with MinIO; this isolates the source side: the plugin's own ``S3Location.open`` read to the
end, the source's CRC32 checked, the bytes dropped. Medians of ``--runs`` per way, the 1-minute load
average with each. Results go to bench/results/source-read-<time>.json.

    nice python bench/source_read.py --size-mib 1024 --runs 3 [--range-mib 8 --in-flight 4]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from drtool_lab.lab import Lab
from drtool_plugins.checkpoints.backup import _Hashers
from drtool_plugins.checkpoints.location import IO_BLOCK, S3Location
from drtool_plugins.checkpoints.ranged import RangedReads, RangePool
from machine import REPO, machine_facts

MiB = 1 << 20


def read_once(loc: S3Location, key: str) -> tuple[float, float]:
    """Wall and CPU seconds of reading ``key`` through the location, its checksum checked."""
    [stat] = [s for s in loc.list() if s.key == key]
    t0, c0 = time.perf_counter(), time.process_time()
    with loc.open(key, stat) as (stream, sums):
        hashers = _Hashers(sums)
        while block := stream.read(IO_BLOCK):
            hashers.update(block)
        assert hashers.verify(key) == ["crc32"]
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--range-mib", type=int, default=RangedReads.range_size // MiB)
    ap.add_argument("--in-flight", type=int, default=RangedReads.in_flight)
    args = ap.parse_args()
    reads = RangedReads(threshold=1, range_size=args.range_mib * MiB, in_flight=args.in_flight)
    labs = Path(tempfile.mkdtemp(prefix="drtool-source-read-"))
    os.environ["DRTOOL_LAB_DIR"] = str(labs)
    lab = Lab("bench", root=labs)
    lab.up(["minio"])
    try:
        minio = lab["minio"]
        minio.create_bucket("source")
        client = minio.client()
        with open("/dev/urandom", "rb") as rnd:
            data = rnd.read(args.size_mib * MiB)
        client.put_object(Bucket="source", Key="ckpt/model.bin", Body=data, ChecksumAlgorithm="CRC32")
        del data
        runs: dict[str, list[tuple[float, float, float]]] = {"one_get": [], "ranged": []}
        with RangePool(reads, workers=4) as pool:
            locs = {
                "one_get": S3Location("s3://source/ckpt", lab="bench"),
                "ranged": S3Location("s3://source/ckpt", lab="bench", workers=16, ranges=pool),
            }
            for _ in range(args.runs):
                for way, loc in locs.items():
                    wall, cpu = read_once(loc, "model.bin")
                    runs[way].append((wall, cpu, os.getloadavg()[0]))
                    print(f"{way}: {args.size_mib / wall:.0f} MiB/s, {cpu:.1f} CPU-s", flush=True)
        gib = args.size_mib / 1024
        summary = {
            way: {
                "MiBps": args.size_mib / statistics.median(r[0] for r in rs),
                "cpu_seconds_per_GiB": statistics.median(r[1] for r in rs) / gib,
                "load_average_1m": [r[2] for r in rs],
            }
            for way, rs in runs.items()
        }
        print(json.dumps(summary, indent=2))
        out = REPO / "bench" / "results"
        out.mkdir(exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        results = {"machine": machine_facts(), "size_mib": args.size_mib, "reads": vars(args), "runs": runs}
        results["summary"] = summary
        (out / f"source-read-{stamp}.json").write_text(json.dumps(results, indent=2))
    finally:
        lab.down()


if __name__ == "__main__":
    main()
