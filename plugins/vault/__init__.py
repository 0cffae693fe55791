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

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult

from . import backup as _backup
from . import restore as _restore
from . import verify as _verify
from .client import Connection
from .lab import VaultLab

__all__ = ["VaultPlugin"]


class VaultPlugin:
    """Implements ``drtool.plugin.contract.Plugin`` (and ``LabSupport`` as ``lab``) for OpenBao and Vault."""

    name = "vault"
    description = "OpenBao/Vault: raft snapshot + KV v2 export, unseal keys escrowed in the store"
    lab = VaultLab()

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _verify.run_verify(ctx, target, options)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        """The target Vault, and the keys that open the snapshot: held in drtool's store, not the source."""
        conn = Connection.from_mapping(target)
        deps = [Dependency("endpoint", conn.address, "Vault the restore writes into", "target.address")]
        escrow = (ctx.plugin_meta or {}).get("escrow")
        if escrow:
            deps.append(
                Dependency(
                    "credential",
                    f"drtool store (backup {ctx.backup_id}, escrow.json)",
                    "unseal keys of the source cluster",
                    f"escrowed at backup time from {escrow['held_in']}",
                )
            )
        if not escrow or not escrow.get("root_token"):
            where = f"file {conn.token_file}" if conn.token_file else f"environment variable {conn.token_env}"
            deps.append(Dependency("credential", where, "token to write into or verify the target Vault"))
        return deps
