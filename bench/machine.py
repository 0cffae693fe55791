"""What every benchmark records about the machine and drtool it ran on, so results can be compared later."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
REPO = Path(__file__).resolve().parents[1]


def command_output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()
    except OSError as exc:
        return f"unavailable: {exc.strerror}"


def machine_facts() -> dict[str, Any]:
    """CPU, memory, kernel, Python, and the drtool version and git revision under test."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / MiB, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "drtool": command_output([sys.executable, "-m", "drtool", "version"]),
        "drtool_git": command_output(["git", "-C", str(REPO), "describe", "--always", "--dirty"]),
    }


def write_results(name: str, results: dict[str, Any]) -> Path:
    """Keep a run's raw figures as ``bench/results/<name>-<UTC time>.json`` (git-ignored)."""
    out_dir = REPO / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"{name}-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(results, indent=2))
    return out
