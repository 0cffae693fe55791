"""Keep key material out of core dumps and away from debuggers of the same user, once a key is in memory.

A crash of a process holding an unwrapped master key would otherwise write it to a core file (systemd-
coredump, apport, or ``core`` in the working directory), and any process of the same user could attach
with ptrace and read it. ``RLIMIT_CORE`` 0 stops the first; ``PR_SET_DUMPABLE`` 0 (Linux) also makes the
kernel refuse ptrace and ``/proc/<pid>/mem`` and ``environ`` to other processes of the user. Both last for
the rest of the process (a key may stay in memory until it exits); programs it starts get dumpable
back when they exec, and inherit the core limit of 0, which does them no harm. Root is not kept out
(docs/threat-model.md, section 4).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import resource
import sys
import threading

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4  # <linux/prctl.h>
PR_GET_DUMPABLE = 3
_done = False
_lock = threading.Lock()


def protect_process() -> None:
    """Turn core dumps off and make this process non-dumpable (once; later calls return at once)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sys.platform.startswith("linux") and _prctl(PR_SET_DUMPABLE, 0) != 0:
            log.debug("prctl(PR_SET_DUMPABLE, 0) failed; core dumps are still off")
        _done = True


def dumpable() -> bool | None:
    """Whether the kernel would dump or let the user ptrace this process (None where unknown)."""
    if not sys.platform.startswith("linux"):
        return None
    result = _prctl(PR_GET_DUMPABLE, 0)
    return None if result < 0 else bool(result)


def _prctl(option: int, arg: int) -> int:
    try:
        # the running program's symbols, libc's among them (ctypes.util.find_library would fork `ldconfig -p`)
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))
    except (OSError, AttributeError):
        return -1
