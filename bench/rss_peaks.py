"""Where a drtool command's resident memory peaks: each new high of VmRSS with the main thread's stack.

Runs the command in this process (as ``python -m drtool`` would), a thread reading ``/proc/self/status``
every 10 ms; at each new high (2 MiB above the last) it prints the RSS and the innermost frames of the main
thread. Cheaper and coarser than memray (no per-allocation record): it tells which phase sets the peak.
The command's own output goes to stdout, the highs to stderr.

    python bench/rss_peaks.py prune --json > /dev/null
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import traceback

FRAMES = 8


def rss_mib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def watch(main: int, highs: list[int]) -> None:
    while True:
        rss = rss_mib()
        if rss > highs[-1] + 2:
            frame = sys._current_frames().get(main)
            stack = traceback.extract_stack(frame)[-FRAMES:] if frame else []
            where = " <- ".join(f"{os.path.basename(s.filename)}:{s.lineno}:{s.name}" for s in reversed(stack))
            print(f"{rss:5d} MiB  {where}", file=sys.stderr)
            highs.append(rss)
        time.sleep(0.01)


def main() -> None:
    highs = [0]
    threading.Thread(target=watch, args=(threading.main_thread().ident, highs), daemon=True).start()
    sys.argv = ["drtool", *sys.argv[1:]]
    try:
        runpy.run_module("drtool", run_name="__main__")
    except SystemExit as exit_:
        print(f"peak {max(highs)} MiB", file=sys.stderr)
        raise SystemExit(exit_.code) from None
    print(f"peak {max(highs)} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
