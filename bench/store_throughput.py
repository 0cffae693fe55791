"""Store throughput: drtool against restic, side by side, on the same inputs, machine and backends.

    python bench/store_throughput.py [--size-mib 1024] [--runs 3] [--backends local,minio]
    python bench/store_throughput.py --summarize bench/results/store_throughput-<stamp>.json

For every backend (a local directory; a real MinIO started from drtool's lab component) and every input (a
file of random bytes; an etcd-like bbolt file, see ``etcd_like.py``), each run uses a fresh store per tool:

1. ``init`` the store (timed, but not part of the throughput);
2. first backup of the input: wall time, peak RSS of the backup process, store size after;
3. second backup of the unchanged input into the same store: wall time, peak RSS, bytes added to the store.

Each measurement is one subprocess reaped with ``wait4(2)``, whose rusage gives the peak RSS and the CPU time
of exactly that process. Store sizes are measured the same way for both tools: the sum of file sizes under
the store directory, or of object sizes under the bucket prefix. The input is read once before each backup
so both tools start with it in the page cache (dropping the cache needs root and a quiet machine; a warm
cache is the reproducible choice). The two tools alternate who goes first from run to run.

Inputs are generated deterministically into ``--workdir`` (kept between invocations, reused when their stamp
matches) and never committed. Raw results go to ``bench/results/`` (git-ignored) as JSON; the summary table
is printed in Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import etcd_like
from machine import command_output, machine_facts

MiB = 1 << 20
MB = 1_000_000
INPUT_SEED = 20260115
GENERATOR_VERSION = 2  # bump when an input generator changes: cached inputs are then regenerated
PASSPHRASE = "store-throughput-bench"  # a throwaway store; not a secret
TOOLS = ("drtool", "restic")
INPUTS = ("random", "etcd")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TMPDIR")


class BenchError(RuntimeError):
    pass


# --- inputs ----------------------------------------------------------------------------------------


def write_random(path: Path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "wb") as out:
        for offset in range(0, size, MiB):
            out.write(rng.randbytes(min(MiB, size - offset)))


GENERATORS: dict[str, Callable[[Path, int, int], None]] = {"random": write_random, "etcd": etcd_like.generate}


def describe_file(path: Path) -> dict[str, Any]:
    """SHA-256 (to check reproducibility) and how well zstd -3 packs it in 1 MiB blocks (~drtool's chunks)."""
    import zstandard

    sha, packed, size = hashlib.sha256(), 0, 0
    compressor = zstandard.ZstdCompressor(level=3)
    with open(path, "rb") as f:
        while block := f.read(MiB):
            sha.update(block)
            packed += len(compressor.compress(block))
            size += len(block)
    return {"sha256": sha.hexdigest(), "bytes": size, "zstd3_1mib_ratio": round(size / packed, 3)}


def prepare_input(workdir: Path, name: str, size: int) -> tuple[Path, dict[str, Any]]:
    """Generate the input unless a file with a matching stamp is already there."""
    path = workdir / f"input-{name}-{size // MiB}MiB.bin"
    stamp_path = path.with_suffix(".json")
    wanted = {"generator": name, "generator_version": GENERATOR_VERSION, "seed": INPUT_SEED, "bytes": size}
    if path.is_file() and stamp_path.is_file():
        stamp = json.loads(stamp_path.read_text())
        if all(stamp.get(k) == v for k, v in wanted.items()) and path.stat().st_size == size:
            return path, stamp
    print(f"generating {path} ...", file=sys.stderr)
    started = time.perf_counter()
    GENERATORS[name](path, size, INPUT_SEED)
    stamp = wanted | describe_file(path) | {"generate_seconds": round(time.perf_counter() - started, 1)}
    stamp_path.write_text(json.dumps(stamp, indent=1))
    return path, stamp


def warm(path: Path) -> None:
    """Read the input once so both tools find it in the page cache."""
    buf = bytearray(8 * MiB)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


# --- stores ----------------------------------------------------------------------------------------


class Location(Protocol):
    drtool_url: str
    restic_url: str

    def size(self) -> int: ...

    def remove(self) -> None: ...


class Backend(Protocol):
    name: str

    def env(self) -> dict[str, str]: ...

    def new(self, tag: str) -> Location: ...


@dataclasses.dataclass
class DirLocation:
    root: Path

    @property
    def drtool_url(self) -> str:
        return str(self.root)

    @property
    def restic_url(self) -> str:
        return str(self.root)

    def size(self) -> int:
        return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(self.root) for f in files)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class LocalBackend:
    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    def env(self) -> dict[str, str]:
        return {}

    def new(self, tag: str) -> DirLocation:
        return DirLocation(self.root / tag)  # both tools create the directory themselves


@dataclasses.dataclass
class BucketLocation:
    client: Any
    api_url: str
    bucket: str
    prefix: str = "store"

    @property
    def drtool_url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def restic_url(self) -> str:
        return f"s3:{self.api_url}/{self.bucket}/{self.prefix}"

    def _objects(self) -> Iterator[dict[str, Any]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/")
        for page in pages:
            yield from page.get("Contents", ())

    def size(self) -> int:
        return sum(int(obj["Size"]) for obj in self._objects())

    def remove(self) -> None:
        keys = [{"Key": obj["Key"]} for obj in self._objects()]
        for i in range(0, len(keys), 1000):
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys[i : i + 1000], "Quiet": True})
        self.client.delete_bucket(Bucket=self.bucket)


class MinioBackend:
    """A real MinIO from drtool's lab (the pinned upstream build in ~/.cache/drtool/bin), one per invocation."""

    name = "minio"

    def __init__(self, root: Path) -> None:
        from drtool_lab.components.minio import MinioServer
        from drtool_lab.lab import Lab

        self.lab = Lab("store-bench", root=root)
        self.lab.up(["minio"])
        server = self.lab["minio"]
        assert isinstance(server, MinioServer)
        self.server = server

    def close(self) -> None:
        self.lab.down()

    def env(self) -> dict[str, str]:
        return self.server.env()

    def new(self, tag: str) -> BucketLocation:
        bucket = f"bench-{tag}"[:63]
        self.server.create_bucket(bucket)
        return BucketLocation(self.server.client(), self.server.api_url, bucket)


@contextmanager
def open_backend(name: str, workdir: Path) -> Iterator[Backend]:
    if name == "local":
        root = workdir / "stores"
        root.mkdir(parents=True, exist_ok=True)
        yield LocalBackend(root)
        return
    if name == "minio":
        minio = MinioBackend(workdir / "lab")
        try:
            yield minio
        finally:
            minio.close()
        return
    raise BenchError(f"unknown backend {name!r}: choose local or minio")


# --- the two tools ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Commands:
    env: dict[str, str]
    init: list[str]
    backup: list[str]


def base_env(home: Path, backend_env: dict[str, str]) -> dict[str, str]:
    """A clean environment: nothing from the caller's AWS profile or drtool config leaks into a run."""
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    return env | {"HOME": str(home)} | backend_env


def drtool_commands(loc: Location, source: Path, home: Path, backend_env: dict[str, str]) -> Commands:
    config = home / "drtool.yaml"
    config.write_text(json.dumps({"sources": {"files": {"paths": [str(source)]}}}))  # JSON is YAML
    env = base_env(home, backend_env) | {
        "DRTOOL_CONFIG": str(config),
        "DRTOOL_CATALOG": str(home / "catalog.db"),
        "DRTOOL_PASSPHRASE": PASSPHRASE,
    }
    drtool = [sys.executable, "-m", "drtool"]
    return Commands(
        env,
        [*drtool, "init", "--store", loc.drtool_url, "--no-save"],
        [*drtool, "--store", loc.drtool_url, "backup", "-p", "files", "--json"],
    )


def restic_commands(loc: Location, source: Path, home: Path, backend_env: dict[str, str]) -> Commands:
    env = base_env(home, backend_env) | {
        "RESTIC_REPOSITORY": loc.restic_url,
        "RESTIC_PASSWORD": PASSPHRASE,
        "RESTIC_CACHE_DIR": str(home / "restic-cache"),
    }
    return Commands(env, ["restic", "init"], ["restic", "backup", "--json", str(source)])


COMMANDS: dict[str, Callable[[Location, Path, Path, dict[str, str]], Commands]] = {
    "drtool": drtool_commands,
    "restic": restic_commands,
}


def tool_report(tool: str, stdout: str) -> dict[str, Any]:
    """What the tool itself says it did (a cross-check of the store-size measurement)."""
    try:
        if tool == "drtool":
            return dict(json.loads(stdout).get("stats", {}))
        summaries = [json.loads(line) for line in stdout.splitlines() if '"summary"' in line]
        return summaries[-1] if summaries else {}
    except ValueError:
        return {}


# --- measuring -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Measurement:
    seconds: float
    peak_rss_kib: int
    cpu_seconds: float
    loadavg_1m: float  # system load when the measurement started: other work on the machine
    report: dict[str, Any] = dataclasses.field(default_factory=dict)


def measure(argv: list[str], env: dict[str, str], log: Path, tool: str) -> Measurement:
    """Run one command as its own process; wall time around it, peak RSS and CPU from its wait4 rusage."""
    loadavg = os.getloadavg()[0]
    with open(log.with_suffix(".out"), "w+b") as out, open(log.with_suffix(".err"), "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    if proc.returncode != 0:
        tail = log.with_suffix(".err").read_text(errors="replace").strip().splitlines()[-5:]
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}:\n  " + "\n  ".join(tail))
    return Measurement(
        round(seconds, 3),
        usage.ru_maxrss,
        round(usage.ru_utime + usage.ru_stime, 3),
        loadavg,
        tool_report(tool, stdout),
    )


@dataclasses.dataclass
class RunResult:
    backend: str
    input: str
    tool: str
    run: int
    input_bytes: int
    init: Measurement
    first: Measurement
    second: Measurement
    store_after_init: int
    store_after_first: int
    store_after_second: int

    @property
    def first_bytes(self) -> int:
        return self.store_after_first - self.store_after_init

    @property
    def second_added(self) -> int:
        return self.store_after_second - self.store_after_first

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {
            "first_bytes": self.first_bytes,
            "second_added": self.second_added,
            "first_mb_per_s": round(self.input_bytes / self.first.seconds / MB, 2),
            "second_added_pct": round(100 * self.second_added / self.first_bytes, 4),
        }


def run_once(backend: Backend, tool: str, input_name: str, source: Path, run: int, workdir: Path) -> RunResult:
    tag = f"{tool}-{input_name}-r{run}-{uuid.uuid4().hex[:6]}"
    home, logs = workdir / "homes" / tag, workdir / "logs"
    home.mkdir(parents=True)
    logs.mkdir(exist_ok=True)
    loc = backend.new(tag)
    try:
        cmds = COMMANDS[tool](loc, source, home, backend.env())
        init = measure(cmds.init, cmds.env, logs / f"{backend.name}-{tag}-init", tool)
        after_init = loc.size()
        warm(source)
        first = measure(cmds.backup, cmds.env, logs / f"{backend.name}-{tag}-first", tool)
        after_first = loc.size()
        warm(source)
        second = measure(cmds.backup, cmds.env, logs / f"{backend.name}-{tag}-second", tool)
        after_second = loc.size()
    finally:
        loc.remove()
        shutil.rmtree(home, ignore_errors=True)
    return RunResult(
        backend.name,
        input_name,
        tool,
        run,
        source.stat().st_size,
        init,
        first,
        second,
        after_init,
        after_first,
        after_second,
    )


# --- summary ---------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per backend x input x tool (results as written to the JSON file)."""
    rows = []
    keys = dict.fromkeys((r["backend"], r["input"], r["tool"]) for r in results)
    for backend, input_name, tool in keys:
        runs = [r for r in results if (r["backend"], r["input"], r["tool"]) == (backend, input_name, tool)]
        rows.append(
            {
                "backend": backend,
                "input": input_name,
                "tool": tool,
                "runs": len(runs),
                "first_s": _median([r["first"]["seconds"] for r in runs]),
                "first_mb_s": _median([r["first_mb_per_s"] for r in runs]),
                "first_cpu_s": _median([r["first"]["cpu_seconds"] for r in runs]),
                "first_rss_mib": _median([r["first"]["peak_rss_kib"] / 1024 for r in runs]),
                "max_rss_mib": max(max(r["first"]["peak_rss_kib"], r["second"]["peak_rss_kib"]) / 1024 for r in runs),
                "stored_mib": _median([r["first_bytes"] / MiB for r in runs]),
                "second_s": _median([r["second"]["seconds"] for r in runs]),
                "second_added_kib": _median([r["second_added"] / 1024 for r in runs]),
                "second_pct": _median([r["second_added_pct"] for r in runs]),
                "loadavg": _median([r["first"]["loadavg_1m"] for r in runs]),
            }
        )
    return rows


def render_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| backend | input | tool | 1st backup s | MB/s | CPU s | peak RSS MiB (max) | stored MiB "
        "| 2nd backup s | 2nd added KiB | 2nd added % | load |"
    )
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['input']} | {r['tool']} | {r['first_s']:.1f} | {r['first_mb_s']:.0f} "
            f"| {r['first_cpu_s']:.1f} | {r['first_rss_mib']:.0f} ({r['max_rss_mib']:.0f}) | {r['stored_mib']:.0f} "
            f"| {r['second_s']:.2f} | {r['second_added_kib']:.0f} | {r['second_pct']:.3f} | {r['loadavg']:.1f} |"
        )
    return "\n".join(lines)


def render_ratios(rows: list[dict[str, Any]]) -> str:
    """drtool / restic for each backend x input: throughput, CPU, peak RSS, stored bytes, 2nd-backup time."""
    lines = [
        "| backend | input | throughput | CPU time | peak RSS | stored bytes | 2nd backup time |",
        "|---|---|---|---|---|---|---|",
    ]
    index = {(r["backend"], r["input"], r["tool"]): r for r in rows}
    for (backend, input_name, tool), d in index.items():
        rr = index.get((backend, input_name, "restic"))
        if tool != "drtool" or rr is None:
            continue
        lines.append(
            f"| {backend} | {input_name} | {d['first_mb_s'] / rr['first_mb_s']:.2f} "
            f"| {d['first_cpu_s'] / rr['first_cpu_s']:.2f} | {d['first_rss_mib'] / rr['first_rss_mib']:.2f} "
            f"| {d['stored_mib'] / rr['stored_mib']:.2f} | {d['second_s'] / rr['second_s']:.1f} |"
        )
    return "\n".join(lines)


def print_summary(results: list[dict[str, Any]]) -> None:
    rows = summarize(results)
    print("\nMedians per backend x input x tool:\n")
    print(render_table(rows))
    print("\nRatios drtool / restic (throughput > 1: drtool faster; others > 1: drtool uses more):\n")
    print(render_ratios(rows))


# --- environment -----------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    from importlib.metadata import version

    from drtool_lab.build import MINIO_VERSION

    return {
        **machine_facts(),
        "restic": command_output(["restic", "version"]),
        "minio": MINIO_VERSION,
        "packages": {p: version(p) for p in ("zstandard", "cryptography", "pyfastcdc", "boto3")},
    }


# --- main ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="size of each input (default 1024)")
    parser.add_argument("--runs", type=int, default=3, help="fresh-store runs per backend x input x tool")
    parser.add_argument("--backends", default="local,minio", help="comma-separated: local, minio")
    parser.add_argument("--inputs", default=",".join(INPUTS), help="comma-separated: random, etcd")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/drtool-store-bench"),
        help="inputs, stores, logs (default /tmp/drtool-store-bench; inputs are reused)",
    )
    parser.add_argument("--output", type=Path, help="results JSON (default bench/results/store_throughput-*.json)")
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only print the tables of a results file")
    return parser.parse_args(argv)


def check_tools() -> None:
    if shutil.which("restic") is None:
        raise BenchError("restic is not on PATH (Debian: apt-get install -y restic)")


def save(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1))
    os.replace(tmp, path)


def run_all(args: argparse.Namespace) -> int:
    check_tools()
    backends = [b for b in args.backends.split(",") if b]
    inputs = [i for i in args.inputs.split(",") if i]
    unknown = [i for i in inputs if i not in GENERATORS]
    if unknown:
        raise BenchError(f"unknown input(s) {unknown}: choose from {', '.join(GENERATORS)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"store_throughput-{stamp}.json"
    sources = {name: prepare_input(args.workdir, name, args.size_mib * MiB) for name in inputs}
    document: dict[str, Any] = {
        "started": stamp,
        "argv": sys.argv,
        "environment": environment(),
        "inputs": {name: info for name, (_, info) in sources.items()},
        "results": [],
    }
    for backend_name in backends:
        with open_backend(backend_name, args.workdir) as backend:
            for input_name, (source, _) in sources.items():
                for run in range(args.runs):
                    order = TOOLS if run % 2 == 0 else TOOLS[::-1]  # alternate who runs first
                    for tool in order:
                        result = run_once(backend, tool, input_name, source, run, args.workdir)
                        document["results"].append(result.to_json())
                        save(output, document)
                        print(
                            f"{backend_name} {input_name} run {run} {tool}: first {result.first.seconds:.1f} s "
                            f"({result.to_json()['first_mb_per_s']} MB/s, {result.first.peak_rss_kib // 1024} MiB),"
                            f" second {result.second.seconds:.1f} s (+{result.second_added} B)",
                            flush=True,
                        )
    document["finished"] = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    save(output, document)
    print_summary(document["results"])
    print(f"\nraw results: {output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.summarize:
            print_summary(json.loads(args.summarize.read_text())["results"])
            return 0
        return run_all(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
