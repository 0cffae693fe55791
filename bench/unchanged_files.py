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

``--pairs N`` measures the unchanged step alone, as the table in docs/performance.md quotes it: each tool (and,
with ``--before DIR``, drtool from the source tree in DIR, e.g. ``git archive`` of an older commit, run with
``PYTHONPATH=DIR``) makes one store and its first backup, then N rounds of one unchanged re-backup each, the
order rotating every round; printed: the medians (min-max) and the median of the pairwise time ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from store_throughput import PASSPHRASE, LocalBackend, Measurement, MiB, measure, write_random

STEPS = ("first", "unchanged", "one_changed")
SEED = 20261205


def commands(
    tool: str, store: str, source: Path, home: Path, pythonpath: Path | None = None
) -> tuple[dict[str, str], list[str], list[str]]:
    """The environment, init and backup command of ``tool`` for ``source`` into ``store`` (``pythonpath``: the
    source tree a drtool is run from, instead of the installed one)."""
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"} | (
        {"PYTHONPATH": str(pythonpath)} if pythonpath else {}
    )
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


def unchanged_pairs(source: Path, workdir: Path, rounds: int, before: Path | None) -> None:
    """The unchanged re-backup alone, ``rounds`` rotating rounds of drtool (now and ``before``) and restic."""
    tools = {"drtool": None, "restic": None} | ({"drtool-before": before} if before else {})
    runs: dict[str, tuple[dict[str, str], list[str], Path]] = {}
    for name, pythonpath in tools.items():
        home = workdir / f"home-pairs-{name}"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        store = LocalBackend(workdir / "stores").new(f"pairs-{name}")
        store.remove()
        env, init, backup = commands(name.partition("-")[0], store.drtool_url, source, home, pythonpath)
        measure(init, env, home / "log", name)
        measure(backup, env, home / "log", name)  # the first backup: the parent of the others
        runs[name] = env, backup, home / "log"
    time.sleep(2.1)  # older than drtool's settle window: every file indexed
    for name, (env, backup, log) in runs.items():
        measure(backup, env, log, name)  # a warm-up round, not counted
    got: dict[str, list[Measurement]] = {name: [] for name in runs}
    names = list(runs)
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            env, backup, log = runs[name]
            got[name].append(measure(backup, env, log, name))
    loads = [m.loadavg_1m for ms in got.values() for m in ms]
    print(f"unchanged re-backup, {rounds} rotating rounds, load {min(loads):.1f}-{max(loads):.1f}")
    print(f"restic's key derivation, calibrated by its init on this machine: {_restic_kdf(workdir)}\n")
    print("| tool | s | CPU-s | peak RSS MiB | time / restic's, pair by pair |")
    print("|---|---|---|---|---|")
    for name, ms in got.items():
        cells = [_spread([getattr(m, f) for m in ms]) for f in ("seconds", "cpu_seconds")]
        ratios = [m.seconds / r.seconds for m, r in zip(ms, got["restic"], strict=True)]
        rss = statistics.median(m.peak_rss_kib for m in ms) // 1024
        print(f"| {name} | {cells[0]} | {cells[1]} | {rss:.0f} | {_spread(ratios)} |")


def _restic_kdf(workdir: Path) -> str:
    """The scrypt settings ``restic init`` chose for the pairs' repository (its key file is plain JSON)."""
    key = json.loads(next((workdir / "stores" / "pairs-restic" / "keys").iterdir()).read_bytes())
    return f"scrypt N={key['N']} r={key['r']} p={key['p']} ({128 * key['N'] * key['r'] >> 20} MiB)"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/unchanged-bench"))
    parser.add_argument("--pairs", type=int, default=0, help="only the unchanged step: this many rotating rounds")
    parser.add_argument("--before", type=Path, help="with --pairs: also drtool from this source tree")
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
    if args.pairs:
        unchanged_pairs(source, args.workdir, args.pairs, args.before)
        return 0
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
