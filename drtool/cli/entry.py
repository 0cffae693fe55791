"""The `drtool` process's entry point: a store's key derivation starts before the CLI's imports.

Opening a store with a passphrase runs Argon2id on its slot (64 MiB, 3 passes, 4 lanes: 0.18 CPU-s), and the
imports before the store is opened (typer, rich, pydantic, NumPy, the store's modules) cost about twice that.
Argon2id releases the GIL, so for a command that opens a store (``OPENS_STORE``) named by ``--store`` or
DRTOOL_STORE, a local one, with the credentials in the environment, the derivation starts here, in a thread,
and the imports run beside it (``drtool.repo.unlock.derive_ahead``; docs/performance.md, "Unchanged
re-backup"). This only starts work early: the store is opened, and every check made, as before; whatever
goes wrong here is left for that path to report, and nothing is ever prompted for here.
"""

from __future__ import annotations

import logging
import os
import sys
from urllib.parse import urlparse

from drtool.environ import CREDENTIAL_ENV
from drtool.memory import limit_malloc_arenas

log = logging.getLogger(__name__)

OPENS_STORE = ("backup", "restore")  # the commands a derivation ahead is for (the hourly backup above all)
VALUED = ("--config", "--store", "--catalog", "--log-level")  # the global options that take the next word


def main() -> None:
    limit_malloc_arenas()  # before any thread (drtool/memory.py)
    derive_store_key_ahead(sys.argv[1:])
    from drtool.cli.main import main as run  # the slow imports, beside the derivation

    run()


def derive_store_key_ahead(argv: list[str]) -> None:
    """Start deriving the key of the store ``argv`` opens, where that is known without the config file."""
    url = _global_option(argv, "--store") or os.environ.get("DRTOOL_STORE")
    if (
        command_word(argv) not in OPENS_STORE
        or not url
        or urlparse(url).scheme not in ("", "file")  # an S3 store: listing its slots twice costs round trips
        or {"-h", "--help"} & set(argv)
        or not any(os.environ.get(name) for name in CREDENTIAL_ENV)  # else credentials_from_env would prompt
    ):
        return
    from drtool.backends import open_backend
    from drtool.config import credentials_from_env
    from drtool.errors import DrtoolError
    from drtool.repo.unlock import derive_ahead

    try:
        credentials = credentials_from_env()
        if credentials.passphrase:
            derive_ahead(open_backend(url), credentials.passphrase)
    except (DrtoolError, OSError) as exc:  # reported by the command itself, when it opens the store
        log.debug("no key derivation ahead: %s", exc)


def command_word(argv: list[str]) -> str | None:
    """The first word that is neither a global option nor its value: the command asked for (None: help)."""
    words = iter(argv)
    for word in words:
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _global_option(argv: list[str], name: str) -> str | None:
    """The value of the global option ``name`` (``--store URL`` or ``--store=URL``) before the command word."""
    words = iter(argv)
    for word in words:
        if word == name:
            return next(words, None)
        if word.startswith(f"{name}="):
            return word.partition("=")[2]
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return None
    return None
