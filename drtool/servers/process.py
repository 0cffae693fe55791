"""Starting, watching and stopping the lab's server processes.

Servers run detached (their own session) so that `drtool lab up` can return and `drtool lab down` can stop
them later from another process; the pid and log path live in the component's state.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from drtool.environ import child_env
from drtool.errors import SourceError
from drtool.servers.ports import free_port as free_port  # every server's port: race-free (ports.py says why)


def spawn(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
    pass_fds: Sequence[int] = (),
) -> int:
    """Start a detached server process writing to ``log_path``; returns its pid. ``pass_fds``: open files it
    inherits (a lock it holds for its lifetime: drtool_lab.components.port_lock)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = child_env(env)  # never the parent's secrets (DRTOOL_PASSPHRASE, AWS_*): drtool.environ
    preexec = None
    if user and os.geteuid() == 0:
        pw = pwd.getpwnam(user)

        def preexec() -> None:  # drop privileges: PostgreSQL refuses to run as root
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

        full_env["HOME"] = pw.pw_dir
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
        )
    return proc.pid


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of this process counts as dead
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def stop(pid: int | None, timeout: float = 15.0) -> None:
    """SIGTERM the process group, then SIGKILL after ``timeout`` seconds."""
    if not alive(pid):
        return
    assert pid is not None
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.05)


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    log_path: Path | None = None,
    running: Callable[[], bool] | None = None,
) -> None:
    """Poll ``check`` until it is true; on timeout raise SourceError quoting the server log's tail.

    With ``running``, a server that exits meanwhile (a bad flag, a peer unreachable at start) fails at once
    with its own error lines, not at the timeout.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running is not None and not running():
            raise SourceError(f"{what} exited while starting", log_tail(log_path))
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise SourceError(f"{what} did not become ready within {timeout:.0f}s", log_tail(log_path))


_ERROR_MARKS = ('"level":"error"', "level=error")  # JSON (slog, zap) and logfmt error lines


def log_tail(log_path: Path | None, lines: int = 2) -> str | None:
    """The last error lines of a server log (klog's E/F lines, or lines saying error), else its last lines."""
    if log_path is None or not log_path.exists():
        return None
    text = log_path.read_text(errors="replace").strip().splitlines()
    errors = [line for line in text if line[:1] in ("E", "F") or any(m in line.lower() for m in _ERROR_MARKS)]
    return " | ".join(line[:300] for line in (errors or text)[-lines:]) or f"no output in {log_path}"


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError):
        return False


def which_or_fail(name: str, hint: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SourceError(f"{name} is not installed", hint)
    return path
