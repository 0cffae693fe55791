"""drtool's key escrow for a Vault: the unseal keys (and optionally the root token) an operator holds.

A raft snapshot is useless without the unseal keys of the cluster it came from, and they must not be
fetched from that cluster at restore time (it is gone). So at backup time the source settings name where
the operator keeps them — ``unseal_keys_file`` (the JSON ``bao operator init -format=json`` prints, or one
base64 key per line) or ``unseal_keys_env`` (an environment variable holding either) — and the plugin
copies them into the store as a sensitive (encrypted) artifact. A restore takes them from there only.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.errors import IntegrityError, SourceError, UsageError
from drtool.plugin.toolkit.settings import as_bool

ARTIFACT = "escrow.json"


@dataclasses.dataclass(frozen=True)
class Escrow:
    unseal_keys: tuple[str, ...]
    root_token: str | None
    held_in: str  # where the operator keeps them (recorded, never the keys themselves)

    def to_json(self) -> bytes:
        return json.dumps({"unseal_keys_b64": list(self.unseal_keys), "root_token": self.root_token}).encode()

    @classmethod
    def from_json(cls, data: bytes, held_in: str = "drtool store") -> Escrow:
        try:
            doc = json.loads(data)
            return cls(tuple(doc["unseal_keys_b64"]), doc.get("root_token"), held_in)
        except (ValueError, KeyError, TypeError):
            raise IntegrityError("the escrowed Vault keys in this backup are unreadable") from None


def parse(text: str, held_in: str, with_root_token: bool) -> Escrow:
    text = text.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            raise UsageError(f"{held_in} is not valid JSON", "give `bao operator init -format=json` output") from None
        keys = doc.get("unseal_keys_b64") or doc.get("keys_base64") or doc.get("recovery_keys_b64") or []
        token = doc.get("root_token") if with_root_token else None
    else:
        keys, token = [k.strip() for k in text.replace(",", "\n").splitlines() if k.strip()], None
    if not keys:
        raise UsageError(f"{held_in} holds no unseal keys", "expected unseal_keys_b64 or one base64 key per line")
    return Escrow(tuple(keys), token, held_in)


def load(source: Mapping[str, Any]) -> Escrow | None:
    """The escrow the source settings name, or None when they name none."""
    with_root = as_bool(source.get("escrow_root_token"), True)
    if source.get("unseal_keys_file"):
        path = Path(str(source["unseal_keys_file"])).expanduser()
        try:
            return parse(path.read_text(), f"file {path}", with_root)
        except OSError as exc:
            raise SourceError(f"cannot read unseal_keys_file {path}: {exc.strerror}") from None
    if source.get("unseal_keys_env"):
        name = str(source["unseal_keys_env"])
        if not os.environ.get(name):
            raise SourceError(f"environment variable {name} (unseal_keys_env) is empty")
        return parse(os.environ[name], f"environment variable {name}", with_root)
    return None
