"""Running the Go toolchain for the lab's builds, with progress a person can read.

A cold build of the lab's servers runs for many minutes, and ``go build`` says nothing while it compiles or
links. So the build runs with ``-v`` (one line per package compiled; ``go: downloading`` lines for modules
fetched), its whole output goes to a log file, and every ``PROGRESS_EVERY`` seconds one line goes to stderr:
what is being built, the time so far, how many modules were downloaded and packages compiled, and the last
of them. A failed build raises ``SourceError`` naming the log and quoting its last line.

A build in a build module first fetches the module zips its ``go.sum`` pins, ``DOWNLOADS`` at a time (``go mod
download`` with that ``GOMAXPROCS``): ``go build`` fetches them while it loads packages, only ``GOMAXPROCS`` (the
core count, 2 here) at a time: Velero's module's 189 zips took 111 s so, 42 s 16 at a time (load average 17 to 20).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from drtool.errors import SourceError
from drtool.progress import elapsed

PROGRESS_EVERY = 15.0
DOWNLOADS = 16  # module zips fetched at a time before a build (they wait on the network, not the CPU)
_GO_HINT = "install Go 1.26 or newer (https://go.dev/dl) and put it on PATH"


def go_executable() -> str:
    """``go`` on PATH, else the official tarball's ``/usr/local/go/bin/go``; a SourceError when there is none."""
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise SourceError("go is not installed: it is needed once to build the lab's upstream servers", _GO_HINT)
    return found


class _Tally:
    """What the go command has reported so far (read by the progress line from another thread)."""

    def __init__(self) -> None:
        self.downloads = 0
        self.packages = 0
        self.last = ""

    def feed(self, line: str) -> None:
        line = line.strip()
        if line.startswith("go: downloading "):
            self.downloads += 1
            self.last = line.removeprefix("go: downloading ")
        elif line.startswith("# get ") and ".zip: 200 " in line:  # `go mod download -x`: a module zip fetched
            self.downloads += 1
            url = line.split()[2].removesuffix(":")  # https://PROXY/MODULE/@v/VERSION.zip
            module, _, version = url.split("/", 3)[-1].partition("/@v/")
            self.last = f"{module}@{version.removesuffix('.zip')}"
        elif line and not line.startswith(("go:", "#")) and " " not in line:
            self.packages += 1  # `-v` prints each package's import path as it is compiled
            self.last = line


def run_go(
    argv: Sequence[str],
    *,
    what: str,
    log_path: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
    hint: str,
    out: TextIO | None = None,
    fetch_first: bool = False,
) -> None:
    """Run ``go argv...`` (output to ``log_path``), printing progress about ``what`` to ``out`` (stderr);
    ``fetch_first``: fetch the module zips of the module in ``cwd`` first, ``DOWNLOADS`` at a time."""
    out = out or sys.stderr
    tally = _Tally()
    start = time.monotonic()
    print(f"building {what}: first time only, progress every {PROGRESS_EVERY:.0f}s, log {log_path}", file=out)
    steps = [(["mod", "download", "-x"], {**env, "GOMAXPROCS": str(DOWNLOADS)})] if fetch_first else []
    with open(log_path, "w") as log:
        for step_argv, step_env in [*steps, (argv, env)]:
            code = _run(step_argv, step_env, cwd, log, tally, lambda: _progress(what, start, tally, out))
            if code != 0:
                break
    if code != 0:
        failed = f"building {what} failed (go exited {code}): {last_line(log_path)}"
        raise SourceError(failed, f"{hint}; log: {log_path}")
    print(f"built {what} in {elapsed(time.monotonic() - start)}", file=out)


def _run(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None,
    log: TextIO,
    tally: _Tally,
    progress: Callable[[], None],
) -> int:
    """One go command, its output into ``log`` and ``tally``, calling ``progress`` every ``PROGRESS_EVERY``."""
    proc = subprocess.Popen(
        [go_executable(), *argv],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    reader = threading.Thread(target=_copy, args=(proc.stdout, log, tally), daemon=True)
    reader.start()
    while True:
        try:
            code = proc.wait(timeout=PROGRESS_EVERY)
            break
        except subprocess.TimeoutExpired:
            progress()
    reader.join()
    return code


def _progress(what: str, start: float, tally: _Tally, out: TextIO) -> None:
    print(
        f"  {what}: {elapsed(time.monotonic() - start)}, {tally.downloads} modules downloaded, "
        f"{tally.packages} packages compiled" + (f"; last: {tally.last}" if tally.last else ""),
        file=out,
        flush=True,
    )


def _copy(stream: TextIO, log: TextIO, tally: _Tally) -> None:
    for line in stream:
        log.write(line)
        tally.feed(line)
    log.flush()


def last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else "no output"
