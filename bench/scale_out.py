"""Scale-out on one machine: a sharded checkpoint backup and restore with 1 worker against 2 (docs/scaling.md).

A checkpoint of ``--shards`` random (incompressible) shards in a lab MinIO. Each worker is the command the
Indexed Job's pods run (the container args of manifests/sharded/job-backup-checkpoints.yaml, with
DRTOOL_JOB, DRTOOL_SHARDS and JOB_COMPLETION_INDEX in its environment), a child process of its own, all of
a job's workers started at once; the store is an S3 store in the same MinIO. Then the published backup is
restored the same way, `drtool shard restore` per worker, to another bucket. Per layout and run: wall time
(first start to last exit), aggregate MiB/s, CPU seconds per GiB summed over the workers, each worker's
peak RSS, and the commit's cost as the publishing worker measured it (``commit_seconds`` in its --json
output: from its part written to the manifest published). Medians of ``--runs``, the 1-minute load average
with every run. Results go to bench/results/scale_out-<time>.json.

    nice python bench/scale_out.py --size-gib 2 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from checkpoints import empty, seed, start_minio
from machine import REPO, load, machine_facts, popen_measured, write_results

MiB = 1 << 20
GiB = 1 << 30
JOB = REPO / "manifests" / "sharded" / "job-backup-checkpoints.yaml"
DRTOOL = [sys.executable, "-m", "drtool"]


def job_args() -> list[str]:
    """The backup Job's container args: the workers run exactly what its pods run."""
    doc = yaml.safe_load(JOB.read_text())
    return list(doc["spec"]["template"]["spec"]["containers"][0]["args"])


def run_workers(argv: list[str], env: dict[str, str], job: str, count: int) -> dict[str, Any]:
    """Start ``count`` workers of ``job`` at once; wall time, summed CPU, per-worker peak RSS, their outputs."""

    def worker(index: int) -> tuple[float, int, str, float]:
        return popen_measured(argv, env | {"DRTOOL_JOB": job, "DRTOOL_SHARDS": str(count),
                                           "JOB_COMPLETION_INDEX": str(index)})  # fmt: skip

    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(worker, range(count)))
    return {
        "wall": time.perf_counter() - started,
        "cpu": sum(r[3] for r in results),
        "rss": [r[1] for r in results],
        "outputs": [json.loads(r[2]) for r in results],
    }


def one_run(env: dict[str, str], work: Path, client: Any, at: dict[str, str], workers: int, run: int) -> dict[str, Any]:
    """A sharded backup of the checkpoint, then a sharded restore of it, with ``workers`` workers (``at``: the
    settings that point a location at the lab's MinIO)."""
    source = {"sources": [{"name": "train", "url": "s3://source/ckpt", **at}]}
    store = f"s3://store/w{workers}-r{run}"
    config = work / f"config-w{workers}-r{run}.yaml"
    config.write_text(yaml.safe_dump({"store": store, "sources": {"checkpoints": source}}))
    renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(work / f"catalog-w{workers}-r{run}.db")}
    subprocess.run([*DRTOOL, "init", "--store", store], env=renv, check=True, capture_output=True)
    row: dict[str, Any] = {"load": load()}
    backup = run_workers([*DRTOOL, *job_args()], renv, f"backup-w{workers}-r{run}", workers)
    (published,) = [o for o in backup["outputs"] if "commit_seconds" in o]
    row["backup"] = {k: backup[k] for k in ("wall", "cpu", "rss")} | {"commit": published["commit_seconds"]}
    bucket = f"restore-w{workers}-r{run}"
    client.create_bucket(Bucket=bucket)
    restore_argv = [*DRTOOL, "shard", "restore", published["id"], "-p", "checkpoints", "-t", f"url=s3://{bucket}/ckpt",
                    *(f"-t{k}={v}" for k, v in at.items()), "--no-verify", "--json"]  # fmt: skip
    restore = run_workers(restore_argv, renv, f"restore-w{workers}-r{run}", workers)
    # two workers finishing together may both see every done marker and both write the (same) commit files
    assert any(o["committed"] for o in restore["outputs"]), restore["outputs"]
    row["restore"] = {k: restore[k] for k in ("wall", "cpu", "rss")}
    empty(client, bucket)
    empty(client, "store", f"w{workers}-r{run}/")  # each run's data deleted once measured: the disk is shared
    return row


def summarize(rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    gib = total / GiB
    out: dict[str, Any] = {"load_average_1m": [round(r["load"], 2) for r in rows]}
    for step in ("backup", "restore"):
        wall = statistics.median(r[step]["wall"] for r in rows)
        out[step] = {
            "wall_s": round(wall, 2),
            "MiBps": round(total / MiB / wall, 1),
            "cpu_s_per_GiB": round(statistics.median(r[step]["cpu"] for r in rows) / gib, 2),
            "peak_rss_per_worker_MiB": round(max(max(r[step]["rss"]) for r in rows) / MiB, 1),
        }
    commits = [r["backup"]["commit"] for r in rows]
    out["backup"] |= {"commit_s_median": round(statistics.median(commits), 4), "commit_s_all": commits}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workdir", default="/work/tmp-bench-scale-out")
    args = ap.parse_args()
    total = int(args.size_gib * 1024) * MiB
    work = Path(args.workdir)
    lab, env = start_minio(work)
    try:
        minio = lab["minio"]
        client = minio.client()
        for bucket in ("source", "store"):
            minio.create_bucket(bucket)
        at = {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}
        disk = work / "disk"
        disk.mkdir(exist_ok=True)
        seed(client, "source", disk, args.shards, total // args.shards)
        subprocess.run(["rm", "-rf", str(disk)], check=True)  # only the MinIO copy is read
        rows: dict[int, list[dict[str, Any]]] = {w: [] for w in args.workers}
        for run in range(args.runs):
            for workers in args.workers:  # interleaved, so a change in the machine's load hits both layouts
                rows[workers].append(one_run(env, work, client, at, workers, run))
                row = rows[workers][-1]
                print(f"run {run}, {workers} worker(s): backup {row['backup']['wall']:.1f} s "
                      f"(commit {row['backup']['commit']:.3f} s), restore {row['restore']['wall']:.1f} s, "
                      f"load {row['load']:.1f}", flush=True)  # fmt: skip
        summary = {str(w): summarize(r, total) for w, r in rows.items()}
        results = {"machine": machine_facts(), "size_bytes": total, "shards": args.shards, "runs": rows}
        results["summary"] = summary
        print(json.dumps(summary, indent=2))
        print(f"wrote {write_results('scale_out', results)}")
    finally:
        lab.down()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
