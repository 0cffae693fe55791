"""Checkpoint backup and restore throughput: drtool against a plain parallel boto3 copy and restic 0.18.1.

One run, side by side, medians of ``--runs``: a checkpoint of ``--shards`` random (incompressible) shards in
a lab MinIO. drtool backs it up into an S3 store in the same MinIO and restores it to another bucket (the
CLI, as an operator runs it, in a child process whose peak RSS is measured); the ceiling is a plain
parallel boto3 copy bucket-to-bucket (GET and PUT through the client: no chunking, compression or
encryption); restic 0.18.1 (built from its module into drtool's binary cache, like the lab's servers)
backs up the same files from local disk into a repository in the same MinIO, and restores them to local
disk. Then one shard changes and drtool backs up again: bytes uploaded and time. The 1-minute load average
is recorded with every figure. Results go to bench/results/checkpoints-<time>.json.

    nice python bench/checkpoints.py --size-gib 4 --runs 3
    nice python bench/checkpoints.py --size-gib 1 --shards 1 --runs 1              # one large object
    nice python bench/checkpoints.py --size-gib 1 --shards 1 --option ranged_threshold=2GiB   # one GET stream

``--option KEY=VALUE`` (repeatable) adds a setting of the checkpoints plugin's source (docs/checkpoints.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from drtool_lab.build import go_binary
from drtool_lab.lab import Lab
from machine import load, machine_facts, popen_measured, write_results

MiB = 1 << 20
PASS = "bench-passphrase"
RESTIC = ("restic", "github.com/restic/restic/cmd/restic", "v0.18.1")  # `@latest` resolves to v0.10.0


def seed(client: Any, bucket: str, disk: Path, shards: int, shard_size: int) -> list[str]:
    import numpy as np

    keys = []
    rng = np.random.default_rng(1)
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.bin"
        data = rng.bytes(shard_size)
        (disk / name).write_bytes(data)
        client.upload_file(str(disk / name), bucket, f"ckpt/run/step-1000/{name}")
        keys.append(f"ckpt/run/step-1000/{name}")
    (disk / "COMPLETE").write_bytes(b"")
    client.put_object(Bucket=bucket, Key="ckpt/run/step-1000/COMPLETE", Body=b"")
    return keys


def plain_copy(client: Any, src: str, dst: str, keys: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of copying ``keys`` through this process, 8 objects at once."""
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(multipart_chunksize=16 * MiB, max_concurrency=4)

    def one(key: str) -> None:
        body = client.get_object(Bucket=src, Key=key)["Body"]
        client.upload_fileobj(body, dst, key, Config=config)

    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, keys))
    return time.perf_counter() - t0, time.process_time() - c0


def empty(client: Any, bucket: str, prefix: str = "") -> None:
    """Delete what a run left in ``bucket`` (keeps the disk use of a run near 4 copies of the data, not 13)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})


def start_minio(work: Path) -> tuple[Lab, dict[str, str]]:
    """A lab MinIO under ``work``, and the environment drtool's child processes run with: its credentials,
    the checkpoints plugin only, a passphrase and a HOME of their own (bench/scale_out.py uses it too)."""
    work.mkdir(parents=True, exist_ok=True)
    labs = Path(tempfile.mkdtemp(dir=work, prefix="labs-"))
    env = {**os.environ, "DRTOOL_LAB_DIR": str(labs), "DRTOOL_PASSPHRASE": PASS, "HOME": str(work / "home")}
    env["DRTOOL_PLUGINS"] = "checkpoints"
    os.environ["DRTOOL_LAB_DIR"] = str(labs)
    lab = Lab("bench", root=labs)
    lab.up(["minio"])
    return lab, env | lab["minio"].env()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=4.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", default="/work/tmp-bench-checkpoints")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a checkpoints setting")
    args = ap.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    total = int(args.size_gib * 1024) * MiB
    shard_size = total // args.shards
    work = Path(args.workdir)
    lab, env = start_minio(work)
    minio = lab["minio"]
    client = minio.client()
    results: dict[str, Any] = {"machine": machine_facts(), "size_bytes": total, "shards": args.shards, "runs": {}}
    results["options"] = options
    disk = work / "disk"
    disk.mkdir(exist_ok=True)
    drtool = [sys.executable, "-m", "drtool"]
    try:
        for b in ("source", "store"):
            minio.create_bucket(b)
        keys = seed(client, "source", disk, args.shards, shard_size)
        keys = str(minio.credentials_file())
        source = {"name": "train", "url": "s3://source/ckpt", "endpoint_url": minio.api_url, "credentials_file": keys}
        src = {"sources": [source], **options}
        restic = str(go_binary(*RESTIC))
        columns = ["copy", "backup", "restore", "restic", "restic_restore", "rss_b", "rss_r", "rss_restic"]
        columns += ["rss_restic_r", "cpu_copy", "cpu_b", "cpu_r", "cpu_restic", "cpu_restic_r", "load"]
        runs: dict[str, list[Any]] = {k: [] for k in columns}
        last_env: dict[str, str] = {}
        for r in range(args.runs):
            runs["load"].append(load())
            minio.create_bucket(f"copy-{r}")
            t, cpu = plain_copy(client, "source", f"copy-{r}", keys)
            runs["copy"].append(t)
            runs["cpu_copy"].append(cpu)
            empty(client, f"copy-{r}")  # each copy deleted once measured: the disk is shared
            store = f"s3://store/run-{r}"
            config = work / f"config-{r}.yaml"
            config.write_text(yaml.safe_dump({"store": store, "sources": {"checkpoints": src}}))
            renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(work / f"catalog-{r}.db")}
            subprocess.run([*drtool, "init", "--store", store], env=renv, check=True, capture_output=True)
            t, rss, out, cpu = popen_measured([*drtool, "backup", "--json"], renv)
            backup_id = json.loads(out)["id"]
            runs["backup"].append(t)
            runs["rss_b"].append(rss)
            runs["cpu_b"].append(cpu)
            minio.create_bucket(f"restore-{r}")
            target = ["-t", f"url=s3://restore-{r}/ckpt", "-t", "lab=bench"]
            t, rss, _, cpu = popen_measured(
                [*drtool, "restore", backup_id, "-p", "checkpoints", *target, "--no-verify"], renv
            )
            runs["restore"].append(t)
            runs["rss_r"].append(rss)
            runs["cpu_r"].append(cpu)
            empty(client, f"restore-{r}")
            restic_repo = f"s3:{env['AWS_ENDPOINT_URL']}/store/restic-{r}"
            renv2 = env | {"RESTIC_PASSWORD": PASS, "RESTIC_REPOSITORY": restic_repo}
            subprocess.run([restic, "init", "-q"], env=renv2, check=True, capture_output=True)
            t, rss, _, cpu = popen_measured([restic, "backup", "-q", str(disk)], renv2)
            runs["restic"].append(t)
            runs["rss_restic"].append(rss)
            runs["cpu_restic"].append(cpu)
            restored = work / f"restic-restore-{r}"
            t, rss, _, cpu = popen_measured([restic, "restore", "latest", "-q", "--target", str(restored)], renv2)
            runs["restic_restore"].append(t)
            runs["rss_restic_r"].append(rss)
            runs["cpu_restic_r"].append(cpu)
            subprocess.run(["rm", "-rf", str(restored)], check=True)
            empty(client, "store", f"restic-{r}/")
            if r + 1 < args.runs:
                empty(client, "store", f"run-{r}/")
            last_env = renv
            print(f"run {r}: " + ", ".join(f"{k}={v[-1]:.1f}" for k, v in runs.items()), flush=True)
        # one shard changes; back up again into the last run's store
        import numpy as np

        client.put_object(Bucket="source", Key=keys[0], Body=np.random.default_rng(99).bytes(shard_size))
        t, rss, out, cpu = popen_measured([*drtool, "backup", "--json"], last_env)
        inc = json.loads(out)
        med = {k: statistics.median(v) for k, v in runs.items()}
        gib = total / (1 << 30)
        results["runs"] = runs
        results["summary"] = {
            "plain_copy_MiBps": total / MiB / med["copy"],
            "drtool_backup_MiBps": total / MiB / med["backup"],
            "drtool_restore_MiBps": total / MiB / med["restore"],
            "restic_backup_MiBps": total / MiB / med["restic"],
            "restic_restore_MiBps": total / MiB / med["restic_restore"],
            "peak_rss_restic_MiB": max(runs["rss_restic"]) / MiB,
            "peak_rss_restic_restore_MiB": max(runs["rss_restic_r"]) / MiB,
            "load_average_1m": runs["load"],
            "backup_vs_copy": med["copy"] / med["backup"],
            "restore_vs_copy": med["copy"] / med["restore"],
            "peak_rss_backup_MiB": max(runs["rss_b"]) / MiB,
            "peak_rss_restore_MiB": max(runs["rss_r"]) / MiB,
            "incremental_seconds": t,
            "incremental_bytes_stored": inc["stats"]["bytes_stored"],
            "incremental_fraction": inc["stats"]["bytes_stored"] / total,
            "incremental_rss_MiB": rss / MiB,
            "incremental_cpu_seconds": cpu,
            "cpu_seconds_per_GiB": {
                "plain_copy": med["cpu_copy"] / gib,
                "drtool_backup": med["cpu_b"] / gib,
                "drtool_restore": med["cpu_r"] / gib,
                "restic_backup": med["cpu_restic"] / gib,
                "restic_restore": med["cpu_restic_r"] / gib,
            },
            "size_gib": gib,
        }
        print(json.dumps(results["summary"], indent=2))
        write_results("checkpoints", results)
    finally:
        lab.down()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
