"""Checkpoint backup and restore throughput: drtool against a plain parallel boto3 copy and restic 0.18.1.

Paired, medians of ``--runs``: a checkpoint of ``--shards`` random (incompressible) shards in a lab
MinIO. drtool backs it up into an S3 store in the same MinIO and restores it to another bucket (the CLI, as
an operator runs it, in a child process whose CPU and peak RSS are measured), once per ``--verify`` mode;
each drtool command runs right after its reference, a plain parallel boto3 copy bucket-to-bucket (GET and
PUT through the client: no chunking, compression or encryption), so each ratio compares two runs under the
same load. With ``--restic``, restic 0.18.1 (built from its module into drtool's binary cache, like the
lab's servers: a Go build) backs up the same files from local disk into the same MinIO and restores them
to disk. Then drtool backs up the unchanged checkpoint again (what it skipped by ETag), and once more after
one shard changed. The 1-minute load average is recorded with every pair. Results go to
bench/results/checkpoints-<time>.json.

    nice python bench/checkpoints.py --size-gib 2 --runs 3 --verify sample --verify full
    nice python bench/checkpoints.py --size-gib 4 --runs 3 --restic
    nice python bench/checkpoints.py --size-gib 1 --shards 1 --runs 1              # one large object
    nice python bench/checkpoints.py --size-gib 1 --shards 1 --option ranged_threshold=2GiB   # one GET stream

``--option KEY=VALUE`` (repeatable) adds a setting of the checkpoints plugin's source (docs/checkpoints.md);
``--restore-option KEY=VALUE`` (repeatable) an option of each restore (``-o``, e.g. ``workers=8``);
``--tls`` has MinIO serve https, as S3 endpoints in production do (botocore's uploads differ: see
docs/performance.md, "The S3 restore over https").
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


def start_minio(work: Path, *, tls: bool = False) -> tuple[Lab, dict[str, str]]:
    """A lab MinIO under ``work`` (serving https with ``tls``), and the environment drtool's child processes
    run with: its credentials (and CA), the checkpoints plugin only, a passphrase and a HOME of their own
    (bench/scale_out.py uses it too)."""
    work.mkdir(parents=True, exist_ok=True)
    labs = Path(tempfile.mkdtemp(dir=work, prefix="labs-"))
    env = {**os.environ, "DRTOOL_LAB_DIR": str(labs), "DRTOOL_PASSPHRASE": PASS, "HOME": str(work / "home")}
    env["DRTOOL_PLUGINS"] = "checkpoints"
    os.environ["DRTOOL_LAB_DIR"] = str(labs)
    lab = Lab("bench", root=labs)
    lab.add("minio", tls=tls)
    lab.up(["minio"])
    return lab, env | lab["minio"].env()


def paired(client: Any, keys: list[str], bucket: str, drtool: list[str], env: dict[str, str]) -> dict[str, float]:
    """The plain copy into ``bucket``, then the drtool command, back to back: one pair under the same load.

    ``drtool`` is run as a child process; its wall, CPU and peak RSS, the copy's wall and CPU, the load
    before the pair, and the copy's time over drtool's (the share of the copy's throughput drtool reaches)."""
    figures = {"load": load()}
    figures["copy"], figures["cpu_copy"] = plain_copy(client, "source", bucket, keys)
    empty(client, bucket)  # each copy deleted once measured: the disk is shared
    figures["wall"], rss, out, figures["cpu"] = popen_measured(drtool, env)
    figures["rss"] = float(rss)
    figures["of_copy"] = figures["copy"] / figures["wall"]
    figures["out"] = out  # type: ignore[assignment]
    return figures


def restic_pair(restic: str, env: dict[str, str], disk: Path, work: Path, r: int) -> dict[str, float]:
    """restic 0.18.1 backs the shards up from disk into the same MinIO and restores them to disk."""
    restic_repo = f"s3:{env['AWS_ENDPOINT_URL']}/store/restic-{r}"
    renv = env | {"RESTIC_PASSWORD": PASS, "RESTIC_REPOSITORY": restic_repo}
    subprocess.run([restic, "init", "-q"], env=renv, check=True, capture_output=True)
    out: dict[str, float] = {}
    out["backup"], rss_b, _, out["cpu_backup"] = popen_measured([restic, "backup", "-q", str(disk)], renv)
    restored = work / f"restic-restore-{r}"
    argv = [restic, "restore", "latest", "-q", "--target", str(restored)]
    out["restore"], rss_r, _, out["cpu_restore"] = popen_measured(argv, renv)
    out["rss_backup"], out["rss_restore"] = float(rss_b), float(rss_r)
    subprocess.run(["rm", "-rf", str(restored)], check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", default="/work/tmp-bench-checkpoints")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a checkpoints setting")
    ap.add_argument("--tls", action="store_true", help="MinIO serves https (what botocore does over TLS)")
    ap.add_argument(
        "--restore-option", action="append", default=[], metavar="KEY=VALUE", help="a restore option (`-o`)"
    )
    ap.add_argument(
        "--verify",
        action="append",
        choices=["sample", "full", "off"],
        help="restore's verification, one restore per value and run (default: sample, the CLI's default)",
    )
    ap.add_argument("--restic", action="store_true", help="also restic 0.18.1 (built from its module: a Go build)")
    args = ap.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    modes = args.verify or ["sample"]
    total = int(args.size_gib * 1024) * MiB
    shard_size = total // args.shards
    gib = total / (1 << 30)
    work = Path(args.workdir)
    lab, env = start_minio(work, tls=args.tls)
    minio = lab["minio"]
    client = minio.client()
    results: dict[str, Any] = {"machine": machine_facts(), "size_bytes": total, "shards": args.shards, "runs": {}}
    results["options"] = options
    results["restore_options"] = args.restore_option
    results["tls"] = args.tls
    disk = work / "disk"
    disk.mkdir(exist_ok=True)
    drtool = [sys.executable, "-m", "drtool"]
    try:
        for b in ("source", "store", "copy"):
            minio.create_bucket(b)
        keys = seed(client, "source", disk, args.shards, shard_size)
        creds = str(minio.credentials_file())
        source = {"name": "train", "url": "s3://source/ckpt", "endpoint_url": minio.api_url, "credentials_file": creds}
        src = {"sources": [source], **options}
        rows: dict[str, list[dict[str, float]]] = {"backup": [], **{f"restore_{m}": [] for m in modes}}
        rows["restic"] = []
        last_env: dict[str, str] = {}
        for r in range(args.runs):
            store = f"s3://store/run-{r}"
            config = work / f"config-{r}.yaml"
            config.write_text(yaml.safe_dump({"store": store, "sources": {"checkpoints": src}}))
            renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(work / f"catalog-{r}.db")}
            subprocess.run([*drtool, "init", "--store", store], env=renv, check=True, capture_output=True)
            row = paired(client, keys, "copy", [*drtool, "backup", "--json"], renv)
            backup_id = json.loads(row.pop("out"))["id"]  # type: ignore[arg-type]
            rows["backup"].append(row)
            for mode in modes:
                minio.create_bucket(f"restore-{r}-{mode}")
                argv = [*drtool, "restore", backup_id, "-p", "checkpoints", "--json"]
                argv += ["-t", f"url=s3://restore-{r}-{mode}/ckpt", "-t", f"endpoint_url={minio.api_url}"]
                argv += ["-t", f"credentials_file={creds}"]
                argv += [arg for option in args.restore_option for arg in ("-o", option)]
                argv += ["--no-verify"] if mode == "off" else [f"--verify={mode}"]
                row = paired(client, keys, "copy", argv, renv)
                report = json.loads(row.pop("out"))  # type: ignore[arg-type]
                row["verified"] = float(report["verified"])
                rows[f"restore_{mode}"].append(row)
                empty(client, f"restore-{r}-{mode}")
            if args.restic:
                rows["restic"].append(restic_pair(str(go_binary(*RESTIC)), env, disk, work, r))
                empty(client, "store", f"restic-{r}/")
            if r + 1 < args.runs:
                empty(client, "store", f"run-{r}/")
            last_env = renv
            done = {k: v[-1] for k, v in rows.items() if v and "wall" in v[-1]}
            parts = [
                f"{k} {f['wall']:.1f} s ({f['of_copy']:.0%} of the copy, load {f['load']:.1f})" for k, f in done.items()
            ]
            print(f"run {r}: " + ", ".join(parts), flush=True)
        # unchanged: a second backup of the same checkpoint; then one shard changes and it is backed up again
        t, rss, out, cpu = popen_measured([*drtool, "backup", "--json"], last_env)
        same = json.loads(out)["stats"]
        import numpy as np

        client.put_object(Bucket="source", Key=keys[0], Body=np.random.default_rng(99).bytes(shard_size))
        t2, rss2, out, cpu2 = popen_measured([*drtool, "backup", "--json"], last_env)
        inc = json.loads(out)["stats"]
        results["runs"] = rows
        summary: dict[str, Any] = {"size_gib": gib, "load_average_1m": [row["load"] for row in rows["backup"]]}
        for name, row_list in rows.items():
            if not row_list or "wall" not in row_list[0]:
                continue
            med = {k: statistics.median(row[k] for row in row_list) for k in row_list[0]}
            summary[name] = {
                "of_copy_median": med["of_copy"],
                "wall_s": med["wall"],
                "copy_wall_s": med["copy"],
                "MiBps": total / MiB / med["wall"],
                "copy_MiBps": total / MiB / med["copy"],
                "cpu_s_per_GiB": med["cpu"] / gib,
                "copy_cpu_s_per_GiB": med["cpu_copy"] / gib,
                "cpu_vs_copy": med["cpu"] / med["cpu_copy"],
                "peak_rss_MiB": [round(row["rss"] / MiB) for row in row_list],
                "load": [round(row["load"], 1) for row in row_list],
            }
        if rows["restic"]:
            med = {k: statistics.median(row[k] for row in rows["restic"]) for k in rows["restic"][0]}
            summary["restic"] = {k: v for k, v in med.items() if not k.startswith("rss")}
        summary["unchanged_backup"] = {"wall_s": t, "cpu_s": cpu, "rss_MiB": rss / MiB} | {
            k: same[k] for k in ("bytes_read", "bytes_reused", "bytes_stored") if k in same
        }
        summary["one_shard_changed"] = {"wall_s": t2, "cpu_s": cpu2, "rss_MiB": rss2 / MiB} | {
            k: inc[k] for k in ("bytes_read", "bytes_reused", "bytes_stored") if k in inc
        }
        results["summary"] = summary
        print(json.dumps(summary, indent=2))
        write_results("checkpoints", results)
    finally:
        lab.down()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
