"""Where the CPU of a checkpoint backup and restore goes, against the plain copy it is measured against.

On this 2-core machine, wall time follows CPU: drtool, MinIO (source and store both) and the plain copy
share the same two cores. This script puts a checkpoint of random shards in a lab MinIO, then samples
``drtool backup`` and ``drtool restore`` with py-spy (``--native``: C frames too, so hashing, AES-GCM and
socket copies are seen where they run) and sorts every sample into what it was doing: the S3 client
(botocore, urllib3, http.client, sockets), the keyed chunk id (BLAKE3), the artifact SHA-256, AES-GCM,
chunking (FastCDC), compression, source checksums, memory copies, and the rest. Alongside: the CPU seconds
of drtool, of MinIO during each phase, and of the plain parallel boto3 copy, per GiB. It explains the
distance to the copy; bench/checkpoints.py measures it.

    pip install py-spy      # not a drtool dependency: only this benchmark uses it
    nice python bench/profile_checkpoints.py --size-gib 1
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from checkpoints import plain_copy, seed, start_minio
from machine import load, machine_facts, write_results

MiB = 1 << 20
GiB = 1 << 30

# (category, pattern on one frame): the innermost frame that matches decides a sample's category, so a
# socket read under botocore counts as "S3 client" and a memcpy under AES-GCM as "AES-GCM"
CATEGORIES: list[tuple[str, str]] = [
    ("AES-GCM", r"aes|gcm|cryptography/hazmat"),
    ("chunk id (keyed BLAKE3)", r"blake3"),
    ("SHA-256 (artifact digest)", r"sha256|hashlib|_hashlib"),
    ("source checksum (CRC32, ISA-L)", r"isal|crc32"),
    ("chunking (FastCDC)", r"fastcdc|chunker\.py"),
    ("compression probe / zstd", r"zstd|codec\.py"),
    ("S3 client (botocore, urllib3, sockets)", r"botocore|urllib3|s3transfer|http/client|socket|ssl\.py|recv|send"),
    ("packing and the store (drtool)", r"drtool/repo|drtool/backends"),
    ("checkpoints plugin (drtool)", r"plugins/checkpoints"),
    ("interpreter start and imports", r"<frozen importlib|_find_and_load"),
    ("memory copies", r"memcpy|memmove"),
]


OTHER = "other (interpreter, threads, GC)"


def category(stack: list[str]) -> str:
    for frame in reversed(stack):
        for name, pattern in CATEGORIES:
            if re.search(pattern, frame, re.IGNORECASE):
                return name
    return OTHER


def summarize(raw: Path) -> tuple[dict[str, int], int, dict[str, int]]:
    """Samples per category from py-spy's raw (collapsed stack) output, and the innermost frames of the
    samples no category claimed (what to name next when "other" is large)."""
    counts: collections.Counter[str] = collections.Counter()
    unnamed: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack_text, _, n = line.rpartition(" ")
        if not stack_text or not n.isdigit():
            continue
        stack = stack_text.split(";")
        name = category(stack)
        counts[name] += int(n)
        if name == OTHER:
            unnamed[" <- ".join(reversed(stack[-3:]))] += int(n)
    return dict(counts.most_common()), sum(counts.values()), dict(unnamed.most_common(12))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sampled(py_spy: str, out: Path, argv: list[str], env: dict[str, str], minio_pid: int, rate: int) -> dict[str, Any]:
    """Run ``argv`` under py-spy; its wall time, own CPU, MinIO's CPU meanwhile, and samples by category."""
    m0, t0 = cpu_seconds(minio_pid), time.perf_counter()
    before = os.times()
    proc = subprocess.run(
        [py_spy, "record", "--native", "--rate", str(rate), "--format", "raw", "--output", str(out), "--", *argv],
        env=env,
        capture_output=True,
        text=True,
    )
    wall, after = time.perf_counter() - t0, os.times()
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed under py-spy: {proc.stderr.strip()[-2000:]}")
    counts, total, unnamed = summarize(out)
    return {
        "wall_s": wall,
        "cpu_s": (after.children_user + after.children_system) - (before.children_user + before.children_system),
        "minio_cpu_s": cpu_seconds(minio_pid) - m0,
        "samples": total,
        "by_category": counts,
        "other_innermost": unnamed,
        "stdout": proc.stdout,
    }


def table(title: str, phase: dict[str, Any], gib: float) -> str:
    lines = [
        f"\n{title}: {phase['wall_s']:.1f} s wall, drtool {phase['cpu_s'] / gib:.2f} CPU-s/GiB "
        f"(py-spy included), MinIO {phase['minio_cpu_s'] / gib:.2f} CPU-s/GiB"
    ]
    for name, n in phase["by_category"].items():
        share = n / phase["samples"]
        lines.append(f"  {name:<42} {100 * share:5.1f} %  ~{share * phase['cpu_s'] / gib:5.2f} CPU-s/GiB")
    lines += [f"    other: {n:5d} samples  {frames[:150]}" for frames, n in phase["other_innermost"].items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    ap.add_argument("--workdir", default="/work/tmp-bench-profile")
    args = ap.parse_args()
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not py_spy:
        raise SystemExit("py-spy not found: pip install py-spy (only this benchmark uses it)")
    total = int(args.size_gib * 1024) * MiB
    gib = total / GiB
    work = Path(args.workdir)
    lab, env = start_minio(work)
    minio = lab["minio"]
    assert minio.pid is not None
    client = minio.client()
    drtool = [sys.executable, "-m", "drtool"]
    result: dict[str, Any] = {"machine": machine_facts(), "size_bytes": total, "shards": args.shards}
    try:
        for b in ("source", "store", "copy", "restore"):
            minio.create_bucket(b)
        disk = work / "disk"
        disk.mkdir(exist_ok=True)
        keys = seed(client, "source", disk, args.shards, total // args.shards)
        shutil.rmtree(disk)  # restic is not run here
        m0 = cpu_seconds(minio.pid)
        copy_wall, copy_cpu = plain_copy(client, "source", "copy", keys)
        result["copy"] = {"wall_s": copy_wall, "cpu_s": copy_cpu, "minio_cpu_s": cpu_seconds(minio.pid) - m0}
        src = {"sources": [{"name": "train", "url": "s3://source/ckpt", "lab": "bench"}]}
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({"store": "s3://store/p", "sources": {"checkpoints": src}}))
        renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(work / "catalog.db")}
        subprocess.run([*drtool, "init", "--store", "s3://store/p"], env=renv, check=True, capture_output=True)
        result["load_before"] = load()
        backup = sampled(py_spy, work / "backup.raw", [*drtool, "backup", "--json"], renv, minio.pid, args.rate)
        out = backup.pop("stdout")  # drtool's JSON between py-spy's own lines
        backup_id = json.loads(out[out.index("{") : out.rindex("}") + 1])["id"]
        target = ["-t", "url=s3://restore/ckpt", "-t", "lab=bench"]
        restore_argv = [*drtool, "restore", backup_id, "-p", "checkpoints", *target, "--no-verify"]
        restore = sampled(py_spy, work / "restore.raw", restore_argv, renv, minio.pid, args.rate)
        restore.pop("stdout")
        result |= {"backup": backup, "restore": restore, "load_after": load()}
        c = result["copy"]
        print(
            f"plain copy: {c['wall_s']:.1f} s wall, client {c['cpu_s'] / gib:.2f} CPU-s/GiB, "
            f"MinIO {c['minio_cpu_s'] / gib:.2f} CPU-s/GiB"
        )
        print(table("drtool backup", backup, gib))
        print(table("drtool restore", restore, gib))
        print(f"\nload average: {result['load_before']:.1f} before, {result['load_after']:.1f} after")
        write_results("profile_checkpoints", result)
    finally:
        lab.down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
