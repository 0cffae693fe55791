"""How long the cheapest `drtool` commands take to answer: `--help` and `version`, median of N fresh processes.

A person typing `drtool --help` waits for the imports of every command module before the first line
appears; this measures that (wall time to the process's exit, which for these commands is just after their
output, and the process's CPU-seconds, which load distorts less) and counts the modules the process loaded
and whether the heavy client libraries were among them (the answer should be no: they load in the commands
that use them). Run it with the venv's python: ``python bench/cli_startup.py --runs 5``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

COMMANDS = (("--help",), ("version",))
HEAVY = ("boto3", "kubernetes", "hvac", "sqlalchemy", "mlflow", "numpy", "pydantic", "cryptography", "pyfastcdc")


def one(args: tuple[str, ...]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh `python -m drtool ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "drtool", *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def modules(args: tuple[str, ...]) -> dict[str, Any]:
    """How many modules `python -X importtime -m drtool ARGS` imported, and which of ``HEAVY``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "drtool", *args], check=True, capture_output=True, text=True
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return {"modules": len(names), "heavy": [m for m in HEAVY if m in names]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    for args in COMMANDS:
        one(args)  # warm the page cache and the bytecode
        runs = [one(args) for _ in range(opts.runs)]
        loaded = modules(args)
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"drtool {' '.join(args)}: {wall:.2f} s, {cpu:.2f} CPU-s (median of {opts.runs}); "
              f"{loaded['modules']} modules, heavy: {', '.join(loaded['heavy']) or 'none'}")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
