"""Logging setup: one stderr handler for drtool's and its plugins' loggers, level from `--log-level`.

Why a module of its own: every command wants the same format and the same rule for the level (option,
else ``DRTOOL_LOG_LEVEL``, else whatever the host program set up), and library modules must only ever call
``logging.getLogger(__name__)`` so that embedding drtool in another program leaves its logging alone.
Log records say what is done (which object, plugin, slot kind, byte counts), never a secret value:
tests/e2e/test_secret_leaks.py runs every command at DEBUG and greps the output for seeded secrets.
"""

from __future__ import annotations

import logging
import os
import sys

from drtool.errors import UsageError

ENV = "DRTOOL_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOGGERS = ("drtool", "drtool_plugins")  # the library and the plugin packages shipped with it
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def resolve_level(name: str) -> int:
    """The numeric level for a name given on the command line or in the environment."""
    upper = name.strip().upper()
    if upper not in LEVELS:
        raise UsageError(f"unknown log level {name!r}", f"use one of {', '.join(LEVELS)} (--log-level or {ENV})")
    return int(getattr(logging, upper))


def setup(option: str | None = None) -> None:
    """Send drtool's records at the chosen level to stderr (stdout stays clean for --json output).

    Nothing asked (no option, no ``DRTOOL_LOG_LEVEL``): logging is left as the host program set it up, so
    `drtool schedule run`'s own INFO setup and an embedding program's handlers keep working.
    """
    name = option or os.environ.get(ENV)
    if not name:
        return
    level = resolve_level(name)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    for logger_name in LOGGERS:
        logger = logging.getLogger(logger_name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
