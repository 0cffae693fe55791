"""Read the restored Vault back through its API and compare it with the backup.

Snapshot mode: unsealed and active, the source's cluster id, every policy (by the SHA-256 of its text),
auth method and secret engine, and every exported KV secret's newest data and version state. It reads with
the escrowed root token, else with the target's ``token_env``/``token_file``. KV mode: every exported
secret's newest data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hvac

from drtool.errors import SourceError
from drtool.plugin.contract import Check, RestoreContext

from . import kv as _kv
from .backup import config_facts
from .client import Connection, active, health
from .restore import Options, exports, load_escrow


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    opts = Options.parse(ctx, options)
    if opts.dry_run:
        return [Check("vault: dry run", True, "the restore was a dry run: nothing to verify")]
    conn = Connection.from_mapping(target)
    meta = ctx.plugin_meta
    token = (load_escrow(ctx).root_token if opts.mode == "snapshot" else None) or conn.token()
    client = conn.client(token)
    status = health(client)
    checks = [Check("unsealed and active", active(status), f"{conn.address}: {_state(status)}")]
    if not checks[0].ok or not token:
        return [*checks, Check("a token to read the restored Vault", bool(token), "escrow a root token or set one")]
    try:
        if opts.mode == "snapshot":
            checks.append(
                Check(
                    "the source's cluster",
                    status.get("cluster_id") == meta.get("cluster_id"),
                    f"{status.get('cluster_name')} (backup: {meta.get('cluster_name')})",
                )
            )
            facts = config_facts(client)
            for key, label in (("policies", "policies"), ("auth", "auth methods"), ("secret_mounts", "secret engines")):
                want, have = meta.get(key) or {}, facts[key]
                diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
                checks.append(Check(f"{label} equal the backup's", not diff, f"{len(want)}" if not diff else str(diff)))
        for mount, name in exports(ctx, opts.mounts).items():
            checks.append(_kv_check(ctx, client, mount, name, full=opts.mode == "snapshot"))
    except SourceError as exc:
        checks.append(Check("reading the restored Vault", False, exc.one_line()))
    return checks


def _kv_check(ctx: RestoreContext, client: hvac.Client, mount: str, name: str, *, full: bool) -> Check:
    """Each secret's newest data (and, after a snapshot restore, every version's state) as in the backup."""
    bad: list[str] = []
    count = 0
    with ctx.open(name) as src:
        _header, secrets = _kv.read_export(src)
        for secret in secrets:
            count += 1
            have = _kv.target_secret(client, mount, secret["path"])
            if (
                have is None
                or _kv.latest(have) != _kv.latest(secret)
                or (full and have["versions"] != secret["versions"])
            ):
                bad.append(secret["path"])
    return Check(f"KV {mount}: secrets equal the backup's", not bad, f"{count} secrets" if not bad else str(bad[:5]))


def _state(status: Mapping[str, Any]) -> str:
    if not status.get("initialized"):
        return "not initialized"
    return "sealed" if status.get("sealed") else ("standby" if status.get("standby") else "active")
