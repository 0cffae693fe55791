"""What running each plan step in a process of its own costs, next to running it in a thread (the old way).

    python bench/step_process.py [--runs 10]

1. The same restore (the ``files`` plugin, one small folder, from a local store) done ``--runs`` times in
   this process, as a thread did it before steps had processes of their own, and ``--runs`` times through
   ``drtool.plans.step_process.run_attempt``: start-up, the job's pickle, the key's hand-over, the restore,
   the kill of the process group and the wait for it to be empty. The difference is the fixed cost a step
   pays once per attempt.
2. For every installed plugin, a fresh interpreter that imports the step entry point and loads only that
   plugin (``load_one``), against one that imports the entry point alone, the two alternating: what each
   plugin adds to its step's start-up (the Kubernetes client, boto3, ...). Start-up times only ever grow
   with load on the machine, so the fastest of five of each is compared.

Results go to ``bench/results/step_process-<stamp>.json``; a Markdown summary is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import REPO, machine_facts

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.plans.step_process import StepJob, run_attempt
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.repository import Repository
from drtool.restore import run_restore

RESULTS_DIR = REPO / "bench" / "results"


def _timed(call: Any, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def per_attempt(work: Path, runs: int) -> dict[str, Any]:
    (work / "source").mkdir()
    (work / "source" / "ca.crt").write_text("the cluster CA\n")
    repo = Repository.init(LocalBackend(work / "store"), passphrase="bench-only-passphrase")
    manifest = run_backup(repo, [get_plugin("files")], {"files": {"paths": [str(work / "source")]}})
    target = {"path": str(work / "restored")}

    def in_thread() -> None:
        assert run_restore(repo, manifest, get_plugin("files"), target).verified

    def in_process() -> None:
        outcome = run_attempt(StepJob.of(repo, manifest, "bench", "files", target, {}), None, lambda _event: None)
        assert outcome.error is None and all(c.ok for c in outcome.checks), outcome

    thread_s, process_s = _timed(in_thread, runs), _timed(in_process, runs)
    return {
        "runs": runs,
        "in_thread_median_s": round(statistics.median(thread_s), 4),
        "in_process_median_s": round(statistics.median(process_s), 4),
        "in_process_fastest_s": round(min(process_s), 4),
        "overhead_median_s": round(statistics.median(process_s) - statistics.median(thread_s), 4),
        "in_process_all_s": [round(t, 4) for t in process_s],
    }


def start_up(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def per_plugin(tries: int = 5) -> dict[str, float]:
    alone = "import drtool.plans.step_main"
    out: dict[str, float] = {}
    bases: list[float] = []
    for name in sorted(load_plugins()):
        loading = f"{alone}; from drtool.plugin.manager import load_one; load_one({name!r})"
        pairs = [(start_up(alone), start_up(loading)) for _ in range(tries)]
        bases += [base for base, _ in pairs]
        out[name] = round(min(p for _, p in pairs) - min(base for base, _ in pairs), 3)
    return {"(entry point alone)": round(min(bases), 3), **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drtool-step-bench-") as tmp:
        attempts = per_attempt(Path(tmp), args.runs)
    plugins = per_plugin()
    result = {"machine": machine_facts(), "per_attempt": attempts, "plugin_import_s": plugins}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"step_process-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"| restore of one small folder ({attempts['runs']} runs, median) | seconds |\n|---|---|")
    print(f"| in a thread (before) | {attempts['in_thread_median_s']} |")
    print(
        f"| in its own process (now) | {attempts['in_process_median_s']} (fastest {attempts['in_process_fastest_s']}) |"
    )
    print(f"| cost per attempt | {attempts['overhead_median_s']} |\n")
    print("| what a step's process imports | extra seconds at start-up |\n|---|---|")
    for name, seconds in plugins.items():
        print(f"| {name} | {seconds} |")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
