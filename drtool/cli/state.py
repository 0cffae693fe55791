"""What every command shares: settings from the global options, and the store/catalog opened on demand."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from drtool.catalog import Catalog
    from drtool.catalog.quick import Recorder
    from drtool.config import Settings
    from drtool.progress import Progress
    from drtool.repo.repository import Repository

console = Console()


@dataclasses.dataclass
class AppState:
    config: str | None = None
    store: str | None = None
    catalog: str | None = None
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from drtool.config import load_settings  # the store's modules load with the first command that needs them

            self._settings = load_settings(self.config, self.store, self.catalog)
        return self._settings

    def open_repo(self, url: str | None = None) -> Repository:
        """The store at ``url`` (default: the configured one), opened with the credentials of the environment;
        what opening it ignored (planted or malformed key slots, ...) is printed as one warning line each."""
        from drtool.backends import open_backend
        from drtool.config import credentials_from_env
        from drtool.repo.repository import Repository

        backend = open_backend(url or self.settings.require_store())
        Repository.read_config(backend)  # a missing store is reported before any passphrase prompt
        repo = Repository.open(backend, credentials_from_env(), max_skew=self.settings.max_clock_skew)
        for line in repo.warnings:
            warn(line)
        repo.on_skip = warn  # an object passed over later (planted or damaged): one line naming it
        return repo

    def open_catalog(self) -> Catalog:
        from drtool.catalog import Catalog  # SQLAlchemy costs ~0.4 s to import; only commands that need it pay

        return Catalog(self.settings.catalog)

    def open_recorder(self) -> Recorder:
        """Where a backup records itself: an existing SQLite catalog without SQLAlchemy (drtool.catalog.quick)."""
        from drtool.catalog.quick import backup_recorder

        return backup_recorder(self.settings.catalog)


def state(ctx: typer.Context) -> AppState:
    return ctx.ensure_object(AppState)


def warn(line: str) -> None:
    """One warning line on stderr (stdout stays clean for --json)."""
    sys.stderr.write(f"drtool: warning: {line}\n")


def progress() -> Progress:
    """Rich bars when a person watches stderr; nothing in cron jobs and pipes."""
    from drtool.progress import NullProgress, RichProgress

    return RichProgress() if sys.stderr.isatty() else NullProgress()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
