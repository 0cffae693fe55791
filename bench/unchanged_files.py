"""Unchanged data: drtool against restic, paired, on a re-backup of files that did not change.

    python bench/unchanged_files.py [--size-mib 1024] [--shards 8] [--runs 3] [--workdir /tmp/unchanged-bench]

The input is ``--shards`` files of random bytes (``--size-mib`` in all) in one folder. In each run, each tool
(alternating who goes first) gets a fresh local store and does, each step its own process timed with
``wait4(2)`` (wall time, CPU seconds, peak RSS; see ``store_throughput.measure``):

1. ``init``, then the first backup of the folder (``first``);
2. a second backup of the unchanged folder (``unchanged``): restic skips files whose metadata is unchanged,
   drtool splices them from the parent backup (plugins/files/unchanged.py);
3. one shard rewritten with new random bytes, then a third backup (``one_changed``): about 1/shards of the
   first backup's work is the aim (issue 31).

The shard is written back to its original bytes before each tool's turn, so both tools see the same input.
The summary prints the median of each step per tool and the drtool / restic ratio of the medians.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from store_throughput import PASSPHRASE, LocalBackend, Measurement, MiB, measure, write_random

STEPS = ("first", "unchanged", "one_changed")
SEED = 20261205


def commands(tool: str, store: str, source: Path, home: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """The environment, init and backup command of ``tool`` for ``source`` into ``store``."""
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    if tool == "restic":
        env |= {"RESTIC_REPOSITORY": store, "RESTIC_PASSWORD": PASSPHRASE, "RESTIC_CACHE_DIR": str(home / "cache")}
        return env, ["restic", "init"], ["restic", "backup", "--json", str(source)]
    config = home / "drtool.yaml"
    config.write_text(f'{{"sources": {{"files": {{"paths": ["{source}"]}}}}}}')  # JSON is YAML
    env |= {"DRTOOL_CONFIG": str(config), "DRTOOL_CATALOG": str(home / "catalog.db"), "DRTOOL_PASSPHRASE": PASSPHRASE}
    drtool = [sys.executable, "-m", "drtool"]
    return env, [*drtool, "init", "--store", store, "--no-save"], [*drtool, "--store", store, "backup", "-p", "files"]


def run_tool(tool: str, source: Path, shards: list[Path], workdir: Path, run: int) -> dict[str, Measurement]:
    home = workdir / f"home-{tool}-{run}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    store = LocalBackend(workdir / "stores").new(f"{tool}-{run}")
    store.remove()
    last = shards[-1]
    write_random(last, last.stat().st_size, SEED + len(shards) - 1)  # its original bytes
    time.sleep(2.1)  # older than drtool's settle window (plugins/files/unchanged.py): indexed in the first
    env, init, backup = commands(tool, store.drtool_url, source, home)
    logs = home / "log"
    measure(init, env, logs, tool)
    out = {"first": measure(backup, env, logs, tool), "unchanged": measure(backup, env, logs, tool)}
    write_random(last, last.stat().st_size, random.randrange(1 << 30))  # one shard changed
    out["one_changed"] = measure(backup, env, logs, tool)
    store.remove()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/unchanged-bench"))
    args = parser.parse_args(argv)
    if shutil.which("restic") is None:
        print("restic is not installed (apt-get install restic): nothing to compare with", file=sys.stderr)
        return 2
    source = args.workdir / "input"
    source.mkdir(parents=True, exist_ok=True)
    each = args.size_mib * MiB // args.shards
    shards = [source / f"shard-{i}.bin" for i in range(args.shards)]
    for i, shard in enumerate(shards):
        if not shard.is_file() or shard.stat().st_size != each:
            write_random(shard, each, SEED + i)
    results: dict[str, list[dict[str, Measurement]]] = {"drtool": [], "restic": []}
    for run in range(args.runs):
        for tool in ("drtool", "restic") if run % 2 == 0 else ("restic", "drtool"):
            results[tool].append(run_tool(tool, source, shards, args.workdir, run))
    print(f"{args.size_mib} MiB in {args.shards} files, local store, medians of {args.runs} paired runs\n")
    print("| step | drtool s | drtool CPU-s | restic s | restic CPU-s | drtool / restic time |")
    print("|---|---|---|---|---|---|")
    for step in STEPS:
        d = [statistics.median(getattr(r[step], f) for r in results["drtool"]) for f in ("seconds", "cpu_seconds")]
        r = [statistics.median(getattr(x[step], f) for x in results["restic"]) for f in ("seconds", "cpu_seconds")]
        print(f"| {step} | {d[0]:.2f} | {d[1]:.2f} | {r[0]:.2f} | {r[1]:.2f} | {d[0] / r[0]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
