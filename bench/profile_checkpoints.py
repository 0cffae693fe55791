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
from pathlib import Path
from typing import Any

import yaml
from checkpoints import plain_copy, seed, start_minio
from machine import load, machine_facts, popen_measured, write_results

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
# a thread blocked in a lock, a queue or the GIL is sampled too (py-spy cannot tell a futex wait from work
# in --native mode): the innermost frames decide, and waits are left out of the CPU shares
WAITS: list[tuple[str, str]] = [
    ("waiting for the GIL", r"take_gil"),
    ("waiting (locks, futures, queues)", r"PyThread_acquire_lock|pthread_cond_(timed)?wait|sem_(clock|timed)?wait"),
    ("waiting for the network (poll before recv/send)", r"^(e?poll|select) \("),
]


def category(stack: list[str]) -> str:
    for frame in reversed(stack[-4:]):
        for name, pattern in WAITS:  # a wait shows at the innermost frames
            if re.search(pattern, frame):
                return name
    for frame in reversed(stack):
        for name, pattern in CATEGORIES:
            if re.search(pattern, frame, re.IGNORECASE):
                return name
    return OTHER


def summarize(raw: Path) -> tuple[dict[str, int], int, dict[str, dict[str, int]]]:
    """Samples per category from py-spy's raw (collapsed stack) output, and per category its commonest
    innermost frames (what a category is made of, and what to name next when "other" is large)."""
    counts: collections.Counter[str] = collections.Counter()
    frames: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack_text, _, n = line.rpartition(" ")
        if not stack_text or not n.isdigit():
            continue
        stack = stack_text.split(";")
        name = category(stack)
        counts[name] += int(n)
        frames[name][" <- ".join(reversed(stack[-3:]))] += int(n)
    return dict(counts.most_common()), sum(counts.values()), {k: dict(v.most_common(6)) for k, v in frames.items()}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sampled(py_spy: str, out: Path, argv: list[str], env: dict[str, str], rate: int) -> dict[str, Any]:
    """Run ``argv`` under py-spy: its samples by category (py-spy's own CPU would count as the child's, so
    CPU seconds come from an unprofiled run: ``measured``)."""
    proc = subprocess.run(
        [py_spy, "record", "--native", "--rate", str(rate), "--format", "raw", "--output", str(out), "--", *argv],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed under py-spy: {proc.stderr.strip()[-2000:]}")
    counts, total, innermost = summarize(out)
    return {"samples": total, "by_category": counts, "innermost": innermost, "stdout": proc.stdout}


def measured(argv: list[str], env: dict[str, str], minio_pid: int) -> dict[str, Any]:
    """Run ``argv`` alone: wall, its own CPU, peak RSS, and MinIO's CPU meanwhile."""
    m0 = cpu_seconds(minio_pid)
    wall, rss, out, cpu = popen_measured(argv, env)
    return {"wall_s": wall, "cpu_s": cpu, "rss": rss, "minio_cpu_s": cpu_seconds(minio_pid) - m0, "stdout": out}


def py_spy_path() -> str:
    found = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not found:
        raise SystemExit("py-spy not found: pip install py-spy (only the profiles use it)")
    return found


def backup_id_in(out: str) -> str:
    return str(json.loads(out[out.index("{") : out.rindex("}") + 1])["id"])  # between py-spy's own lines


def table(title: str, phase: dict[str, Any], gib: float) -> str:
    """Each CPU category's share of the samples that were not waits, and its CPU seconds per GiB."""
    waits = {name for name, _ in WAITS}
    working = sum(n for name, n in phase["by_category"].items() if name not in waits)
    minio = f", MinIO {phase['minio_cpu_s'] / gib:.2f} CPU-s/GiB meanwhile" if "minio_cpu_s" in phase else ""
    drtool = f"drtool {phase['cpu_s'] / gib:.2f} CPU-s/GiB (unprofiled run)"
    lines = [f"\n{title}: {phase['wall_s']:.1f} s wall, {drtool}{minio}"]
    for name, n in phase["by_category"].items():
        if name in waits:
            lines.append(f"  {name:<42} {100 * n / phase['samples']:5.1f} % of all samples (not CPU)")
            continue
        share = n / working
        lines.append(f"  {name:<42} {100 * share:5.1f} %  ~{share * phase['cpu_s'] / gib:5.2f} CPU-s/GiB")
        if share > 0.15 or name == OTHER:
            lines += [f"      {n:5d}  {frames[:160]}" for frames, n in phase["innermost"][name].items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    ap.add_argument("--workdir", default="/work/tmp-bench-profile")
    args = ap.parse_args()
    py_spy = py_spy_path()
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
        for b in ("source", "store", "copy"):
            minio.create_bucket(b)
        disk = work / "disk"
        disk.mkdir(exist_ok=True)
        keys = seed(client, "source", disk, args.shards, total // args.shards)
        shutil.rmtree(disk)  # restic is not run here
        m0 = cpu_seconds(minio.pid)
        copy_wall, copy_cpu = plain_copy(client, "source", "copy", keys)
        result["copy"] = {"wall_s": copy_wall, "cpu_s": copy_cpu, "minio_cpu_s": cpu_seconds(minio.pid) - m0}
        keys = str(minio.credentials_file())
        src = {
            "sources": [
                {"name": "train", "url": "s3://source/ckpt", "endpoint_url": minio.api_url, "credentials_file": keys}
            ]
        }
        result["load_before"] = load()
        phases: dict[str, dict[str, Any]] = {}
        for run in ("measured", "sampled"):  # each run a store of its own: a second backup would dedupe
            store = f"s3://store/{run}"
            config = work / f"config-{run}.yaml"
            config.write_text(yaml.safe_dump({"store": store, "sources": {"checkpoints": src}}))
            renv = env | {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(work / f"catalog-{run}.db")}
            subprocess.run([*drtool, "init", "--store", store], env=renv, check=True, capture_output=True)
            minio.create_bucket(f"restore-{run}")
            target = ["-t", f"url=s3://restore-{run}/ckpt", "-t", f"endpoint_url={minio.api_url}"]
            target += ["-t", f"credentials_file={keys}"]

            def restore_argv(backup_id: str, target: list[str] = target) -> list[str]:
                return [*drtool, "restore", backup_id, "-p", "checkpoints", *target]  # verification on (sampled)

            if run == "measured":
                backup = measured([*drtool, "backup", "--json"], renv, minio.pid)
                restore = measured(restore_argv(backup_id_in(backup["stdout"])), renv, minio.pid)
            else:
                backup = sampled(py_spy, work / "backup.raw", [*drtool, "backup", "--json"], renv, args.rate)
                restore = sampled(
                    py_spy, work / "restore.raw", restore_argv(backup_id_in(backup["stdout"])), renv, args.rate
                )
            for name, phase in (("backup", backup), ("restore", restore)):
                phase.pop("stdout")
                phases.setdefault(name, {}).update(phase)
        backup, restore = phases["backup"], phases["restore"]
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
