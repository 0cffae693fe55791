"""What every benchmark records about the machine and drtool it ran on, so results can be compared later."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
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


def load() -> float:
    return os.getloadavg()[0]


def popen_measured(argv: list[str], env: dict[str, str]) -> tuple[float, int, str, float]:
    """Wall time, peak RSS (bytes), stdout and CPU seconds (user + system) of a child process.

    CPU seconds compare tools fairly on a shared machine, where wall time depends on everyone's load.

    The peak is the child's own VmHWM, polled: wait4's ru_maxrss would include this (large) process's RSS,
    which Linux carries into a forked child's maximum across exec.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak, cpu = 0, 0.0
    status, stat = Path(f"/proc/{proc.pid}/status"), Path(f"/proc/{proc.pid}/stat")
    tick = os.sysconf("SC_CLK_TCK")

    def poll() -> None:
        nonlocal peak, cpu
        while proc.poll() is None:
            try:
                line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
                peak = max(peak, int(line.split()[1]) * 1024)
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cpu = max(cpu, (int(fields[11]) + int(fields[12])) / tick)  # utime, stime
            except (OSError, StopIteration, IndexError, ValueError):
                pass
            time.sleep(0.1)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    watcher.join()
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {err.decode().strip()[-2000:]}")
    return elapsed, peak, out.decode(), cpu
