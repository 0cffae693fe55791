"""Read the restored Vault back through its API and compare it with the backup.

Snapshot mode: unsealed and active, the source's cluster id, every policy (by the SHA-256 of its text),
auth method and secret engine, and every exported KV secret's versions (data and state). It reads with
the escrowed root token, else with the target's ``token_env``/``token_file``. KV mode: every exported
secret's newest data.

A restored Vault is in use at once: applications write new versions of their secrets, a platform's operator
adds policies and mounts. What the restore set is verified exactly (the backup's versions, policies, auth
methods, engines); what was written since is listed with its creation time and does not fail.
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

MAX_LISTED = 5


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    opts = Options.parse(ctx, options)
    if opts.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
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
                checks.append(_config_check(label, meta.get(key) or {}, facts[key]))
        for mount, name in exports(ctx, opts.mounts).items():
            checks.append(_kv_check(ctx, client, mount, name, full=opts.mode == "snapshot"))
    except SourceError as exc:
        checks.append(Check("reading the restored Vault", False, exc.one_line()))
    return checks


def _config_check(label: str, want: Mapping[str, Any], have: Mapping[str, Any]) -> Check:
    """The backup's policies, auth methods or engines, each as it was; what the target has beyond them (a
    platform's Vault operator configuring itself after the restore) is listed, not failed."""
    diff = sorted(k for k in want if want.get(k) != have.get(k))
    added = sorted(k for k in have if k not in want)
    detail = f"{len(want) - len(diff)} of {len(want)} equal" + (f"; differ or missing: {diff}" if diff else "")
    if added:
        detail += f"; added in the target since (not compared): {', '.join(added[:MAX_LISTED])}"
    return Check(f"{label} equal the backup's", not diff, detail)


def _kv_check(ctx: RestoreContext, client: hvac.Client, mount: str, name: str, *, full: bool) -> Check:
    """Each secret as the restore wrote it: every version (after a snapshot restore) or the newest data. Versions
    that clients wrote after the restore (an application rotating its password) are listed, not failed."""
    bad: list[str] = []
    newer: list[str] = []
    count = 0
    with ctx.open(name) as src:
        _header, secrets = _kv.read_export(src)
        for secret in secrets:
            count += 1
            have = _kv.target_secret(client, mount, secret["path"])
            written_since = None if have is None else _written_since(secret, have, full=full)
            if written_since is None:
                bad.append(secret["path"])
            else:
                newer += [f"{secret['path']} v{v['version']} ({v.get('created_time')})" for v in written_since]
    detail = f"{count} secrets" if not bad else str(bad[:5])
    if newer:
        detail += f"; written since the restore (not compared): {', '.join(newer[:MAX_LISTED])}"
    return Check(f"KV {mount}: secrets equal the backup's", not bad, detail)


def _written_since(secret: Mapping[str, Any], have: Mapping[str, Any], *, full: bool) -> list[dict[str, Any]] | None:
    """The target's versions newer than what the restore wrote, or None when what it wrote does not hold."""
    if full:  # a snapshot restore brings back every version with its number
        by_number = {v["version"]: v for v in have["versions"]}
        if any(by_number.get(v["version"]) != v for v in secret["versions"]):
            return None
        last = max((v["version"] for v in secret["versions"]), default=0)
    else:  # a KV restore wrote the newest data as a new version: the newest version holding it
        want = _kv.latest(secret)
        holding = [v["version"] for v in have["versions"] if v.get("data") == want]
        if not holding:
            return None
        last = max(holding)
    return [v for v in have["versions"] if v["version"] > last]


def _state(status: Mapping[str, Any]) -> str:
    if not status.get("initialized"):
        return "not initialized"
    return "sealed" if status.get("sealed") else ("standby" if status.get("standby") else "active")
