"""The vault plugin: an OpenBao/Vault with integrated raft storage, rebuilt from a snapshot and drtool's escrow.

Source settings: ``address`` (VAULT_ADDR), ``token_env`` (default VAULT_TOKEN) or ``token_file``,
``cacert``, ``kv_mounts`` (default: every KV v2 mount), ``snapshot`` (true), and the escrow:
``unseal_keys_file`` or ``unseal_keys_env`` (where the operator keeps the unseal keys; with
``escrow_root_token``, default true, a root token found there is escrowed too).

Restore target: ``address`` (+ ``token_env``/``token_file`` for mode=kv). Options: ``mode`` (snapshot|kv),
``trial`` (auto|true|false), ``existing`` (update|skip|fail, mode=kv), ``mounts``, ``dry_run``.
docs/vault.md explains each.
"""

from __future__ import annotations

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["VaultPlugin"]


class VaultPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for OpenBao and Vault."""

    name = "vault"
    description = "OpenBao/Vault: raft snapshot + KV v2 export, unseal keys escrowed in the store"
    schema = SCHEMA
    discover = staticmethod(_backup.discover)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_deps.dependencies)
