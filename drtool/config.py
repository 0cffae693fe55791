"""Where drtool finds its store, catalog, sources and credentials.

Precedence, highest first: command-line options, environment (DRTOOL_STORE, DRTOOL_CATALOG), the config
file (--config, DRTOOL_CONFIG, ~/.config/drtool/config.yaml), built-in defaults. Secrets never come from
the command line or the config file: a passphrase comes from DRTOOL_PASSPHRASE, a file named by
DRTOOL_PASSPHRASE_FILE, or an interactive prompt; a key file from DRTOOL_KEYFILE; recovery shares from a
file named by DRTOOL_RECOVERY_SHARES_FILE (one share per line).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from drtool import yamlio
from drtool.crypto.credentials import Credentials, Expected
from drtool.crypto.slots import KeyFile, read_keyfile
from drtool.errors import UsageError
from drtool.repo.times import DEFAULT_MAX_SKEW

if TYPE_CHECKING:
    from drtool.scheduler.sets import BackupSet

DEFAULT_CONFIG = "~/.config/drtool/config.yaml"
DEFAULT_CATALOG = "~/.local/share/drtool/catalog.db"
_ALLOWED_KEYS = {"store", "catalog", "sources", "backup_sets", "max_clock_skew"}


@dataclasses.dataclass
class Settings:
    config_path: Path
    store: str | None = None
    catalog: str = DEFAULT_CATALOG
    sources: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    backup_sets: dict[str, BackupSet] = dataclasses.field(default_factory=dict)  # docs/scheduling.md
    # how far a backup's stated finish may be from when the store received it (drtool/repo/times.py)
    max_clock_skew: dt.timedelta = DEFAULT_MAX_SKEW

    def require_store(self) -> str:
        if not self.store:
            raise UsageError(
                "no store configured", "pass --store URL, set DRTOOL_STORE, or run `drtool init --store URL`"
            )
        return self.store

    def save_store(self, url: str) -> None:
        """Remember the store URL in the config file (other settings in it are kept)."""
        data = _read_yaml(self.config_path) if self.config_path.exists() else {}
        data["store"] = url
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(data, sort_keys=False))


def _read_yaml(path: Path) -> dict[str, Any]:
    data = yamlio.load(path, "config file") or {}
    if not isinstance(data, dict):
        raise UsageError(f"config file {path} must be a mapping", "see docs/configuration.md")
    unknown = {str(key) for key in data} - _ALLOWED_KEYS
    if unknown:
        raise UsageError(
            f"config file {path} has unknown key(s): {', '.join(sorted(unknown))}",
            f"allowed: {', '.join(sorted(_ALLOWED_KEYS))}",
        )
    return data


def load_settings(config: str | None = None, store: str | None = None, catalog: str | None = None) -> Settings:
    path = Path(config or os.environ.get("DRTOOL_CONFIG") or DEFAULT_CONFIG).expanduser()
    data = _read_yaml(path) if path.exists() else {}
    if config and not path.exists():
        raise UsageError(f"config file {path} does not exist", "check --config")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict) or not all(isinstance(v, dict) for v in sources.values()):
        raise UsageError(f"`sources` in {path} must map plugin names to settings", "see docs/configuration.md")
    return Settings(
        config_path=path,
        store=store or os.environ.get("DRTOOL_STORE") or data.get("store"),
        catalog=catalog or os.environ.get("DRTOOL_CATALOG") or data.get("catalog") or DEFAULT_CATALOG,
        sources=sources,
        backup_sets=_backup_sets(data.get("backup_sets"), path),
        max_clock_skew=_skew(data.get("max_clock_skew", DEFAULT_MAX_SKEW), path),
    )


def _skew(raw: Any, path: Path) -> dt.timedelta:
    from drtool.durations import parse_duration

    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise UsageError(f"max_clock_skew in {path}: {exc}", "see docs/configuration.md") from None


def _backup_sets(raw: Any, path: Path) -> dict[str, BackupSet]:
    if raw is None:
        return {}
    from drtool.scheduler.sets import parse_backup_sets  # pydantic models: only configs that declare sets pay

    return parse_backup_sets(raw, str(path))


def _read_secret_file(var: str) -> str | None:
    path = os.environ.get(var)
    if not path:
        return None
    try:
        return Path(path).expanduser().read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {var} file {path}: {exc.strerror}", f"check {var}") from None


def passphrase_from_env(prompt: str = "Store passphrase: ", confirm: bool = False) -> str | None:
    if os.environ.get("DRTOOL_PASSPHRASE"):
        return os.environ["DRTOOL_PASSPHRASE"]
    from_file = _read_secret_file("DRTOOL_PASSPHRASE_FILE")
    if from_file is not None:
        return from_file.rstrip("\r\n")
    if sys.stdin.isatty() and not os.environ.get("DRTOOL_KEYFILE"):
        first = getpass.getpass(prompt)
        if confirm and getpass.getpass("Repeat passphrase: ") != first:
            raise UsageError("the passphrases do not match", "type the same passphrase twice")
        return first
    return None


def keyfile_from_env() -> KeyFile | None:
    text = _read_secret_file("DRTOOL_KEYFILE")
    return read_keyfile(text, os.environ["DRTOOL_KEYFILE"]) if text is not None else None


def expected_key_from_env() -> Expected | None:
    """The key generation a deployment without pins expects (DRTOOL_EXPECT_KEY_CHECK, _GENERATION; both or none)."""
    check, generation = os.environ.get("DRTOOL_EXPECT_KEY_CHECK"), os.environ.get("DRTOOL_EXPECT_KEY_GENERATION")
    if check is None and generation is None:
        return None
    if check is None or generation is None:
        raise UsageError("DRTOOL_EXPECT_KEY_CHECK and DRTOOL_EXPECT_KEY_GENERATION go together", "set both, or neither")
    return Expected.parse(check.strip(), generation.strip())


def credentials_from_env() -> Credentials:
    shares_text = _read_secret_file("DRTOOL_RECOVERY_SHARES_FILE")
    shares = tuple(line.strip() for line in (shares_text or "").splitlines() if line.strip())
    keyfile = keyfile_from_env()
    passphrase = None if (keyfile or shares) else passphrase_from_env()
    from_file = Credentials.of_keyfile(keyfile) if keyfile else Credentials()
    creds = dataclasses.replace(from_file, passphrase=passphrase, shares=shares, expect=expected_key_from_env())
    if not (creds.passphrase or creds.keyfile_secret or creds.shares):
        raise UsageError(
            "no key given to open the store",
            "set DRTOOL_PASSPHRASE, DRTOOL_PASSPHRASE_FILE, DRTOOL_KEYFILE or DRTOOL_RECOVERY_SHARES_FILE",
        )
    return creds
