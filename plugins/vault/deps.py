"""What a vault restore contacts and which keys it needs (independence analysis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import Dependency, RestoreContext

from .client import Connection


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
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
