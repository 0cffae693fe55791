"""Restore a Vault backup: the raft snapshot into a fresh OpenBao (snapshot.py), or KV secrets into any Vault.

``mode=snapshot`` (the default when the backup holds a snapshot and the escrow) rebuilds the whole Vault.
``mode=kv`` replays the KV v2 exports into an existing, unsealed Vault (``address`` + a token with write
access): in two passes over each export — the first reads it to its end (the store verifies it) and decides
per secret what to do, refusing before any write when ``existing=fail`` meets a differing secret; the
second writes. Per secret: absent -> every version replayed in order, then its metadata; same newest data
-> nothing; different -> ``existing`` decides (update: the backup's newest data becomes a new version;
skip; fail). Mounts the target lacks are created with the source's options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import hvac

from drtool.errors import IntegrityError, NotFound, SourceError, UsageError
from drtool.plugin.contract import RestoreContext, RestoreResult
from drtool.plugin.toolkit import paths
from drtool.plugin.toolkit.settings import as_bool

from . import kv as _kv
from . import snapshot as _snapshot
from .backup import SNAPSHOT
from .client import Connection, active, call, health
from .escrow import ARTIFACT as ESCROW
from .escrow import Escrow

EXISTING = ("update", "skip", "fail")


@dataclasses.dataclass(frozen=True)
class Options:
    mode: str
    trial: str
    existing: str
    mounts: tuple[str, ...]
    dry_run: bool = False

    @classmethod
    def parse(cls, ctx: RestoreContext, options: Mapping[str, Any]) -> Options:
        names = {a.name for a in ctx.artifacts}
        mode = str(options.get("mode") or ("snapshot" if {SNAPSHOT, ESCROW} <= names else "kv"))
        if mode not in ("snapshot", "kv"):
            raise UsageError(f"unknown vault restore mode {mode!r}", "mode=snapshot or mode=kv")
        if mode == "snapshot" and not {SNAPSHOT, ESCROW} <= names:
            lacking = "raft snapshot" if SNAPSHOT not in names else "escrowed unseal keys"
            raise UsageError(
                f"backup {ctx.backup_id} holds no {lacking}, so its Vault cannot be rebuilt from a snapshot",
                "restore its KV exports with -o mode=kv, or back up with unseal_keys_file set (docs/vault.md)",
            )
        existing = str(options.get("existing") or "update")
        if existing not in EXISTING:
            raise UsageError(f"existing={existing!r} is not one of {', '.join(EXISTING)}")
        raw = options.get("mounts") or ()
        mounts = tuple(m.strip().strip("/") for m in (raw.split(",") if isinstance(raw, str) else raw) if m.strip())
        trial = str(options.get("trial", "auto")).lower()
        return cls(mode, trial, existing, mounts, as_bool(options.get("dry_run"), False))


def load_escrow(ctx: RestoreContext) -> Escrow:
    with ctx.open(ESCROW) as src:
        return Escrow.from_json(src.read())


def exports(ctx: RestoreContext, mounts: tuple[str, ...] = ()) -> dict[str, str]:
    """mount -> artifact name of the KV exports to restore."""
    kv = [a for a in ctx.artifacts if a.name.startswith(_kv.PREFIX)]
    found = {paths.relative(a.meta["mount"], "vault: KV mount"): a.name for a in kv}
    missing = sorted(set(mounts) - set(found))
    if missing:
        raise NotFound(f"backup {ctx.backup_id} has no KV export of {', '.join(missing)}", f"it has {sorted(found)}")
    return {m: n for m, n in found.items() if not mounts or m in mounts}


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    opts = Options.parse(ctx, options)
    conn = Connection.from_mapping(target)
    if opts.mode == "snapshot":
        client = hvac.Client(url=conn.address, verify=conn.cacert or True)
        with_trial = _snapshot.trial_wanted(opts.trial)
        if opts.dry_run:
            return RestoreResult(False, f"dry run: {_snapshot.preview(client, ctx.plugin_meta)}", {"mode": "snapshot"})
        changed, summary = _snapshot.run(client, ctx, load_escrow(ctx), ctx.plugin_meta, with_trial)
        return RestoreResult(changed, summary, {"mode": "snapshot", "address": conn.address, "trial": with_trial})
    client = _writable(conn)
    chosen = exports(ctx, opts.mounts)
    plans = {mount: _plan(ctx, client, mount, name, opts.existing) for mount, name in chosen.items()}
    if opts.dry_run:
        would = {m: _count(plan.values()) for m, plan in plans.items()}
        return RestoreResult(False, "dry run: nothing written", {"mode": "kv", "mounts": would})
    done = {mount: _restore_mount(ctx, client, mount, chosen[mount], plan) for mount, plan in plans.items()}
    changed = sum(c.get("replayed", 0) + c.get("updated", 0) for c in done.values())
    return RestoreResult(bool(changed), f"KV restore: {changed} secrets written", {"mode": "kv", "mounts": done})


def _writable(conn: Connection) -> hvac.Client:
    client = conn.client()
    if not active(health(client)):
        raise SourceError(f"the Vault at {conn.address} is not initialized, unsealed and active", "unseal it first")
    if not client.token:
        raise UsageError(f"no Vault token for {conn.address} in ${conn.token_env}", "set it, or name a token_file")
    return client


def _plan(ctx: RestoreContext, client: hvac.Client, mount: str, name: str, existing: str) -> dict[str, str]:
    """First pass: read the whole export (verified by the store at its end); path -> action."""
    present = mount in _kv.kv2_mounts(client)

    def action(secret: dict[str, Any]) -> tuple[str, str]:
        have = _kv.target_secret(client, mount, secret["path"]) if present else None
        if have is None:
            return secret["path"], "replayed"
        if _kv.latest(have) == _kv.latest(secret):
            return secret["path"], "unchanged"
        if existing == "fail":
            raise UsageError(
                f"{mount}/{secret['path']} exists in the target Vault with other data; nothing was written",
                "-o existing=update writes the backup's data as a new version; existing=skip leaves it",
            )
        return secret["path"], "updated" if existing == "update" else "skipped"

    with ctx.open(name) as src:
        header, secrets = _kv.read_export(src)
        if header["mount"] != mount:  # the second pass enables the header's mount and writes into this one
            raise IntegrityError(f"the KV export {name} says it holds mount {header['mount']!r}, not {mount!r}")
        return dict(_kv.ordered_map(action, secrets))


def _restore_mount(
    ctx: RestoreContext, client: hvac.Client, mount: str, name: str, actions: Mapping[str, str]
) -> dict[str, int]:
    """Second pass: apply the plan (every mount was planned before anything was written)."""
    with ctx.open(name) as src:
        header, secrets = _kv.read_export(src)
        if mount not in _kv.kv2_mounts(client):
            _enable(client, header)
        for secret in secrets:
            action = actions[secret["path"]]
            if action == "replayed":
                _kv.replay(client, mount, secret)
            elif action == "updated":
                call(
                    f"writing {mount}/{secret['path']}",
                    client.secrets.kv.v2.create_or_update_secret,
                    path=secret["path"],
                    secret=_kv.latest(secret) or {},
                    mount_point=mount,
                )
    return _count(actions.values())


def _count(actions: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for action in actions:
        counts[action] = counts.get(action, 0) + 1
    return counts


def _enable(client: hvac.Client, header: Mapping[str, Any]) -> None:
    mount = header["mount"]
    call(
        f"enabling KV v2 at {mount}",
        client.sys.enable_secrets_engine,
        backend_type="kv",
        path=mount,
        description=header.get("description") or None,
        options=header.get("options") or {"version": "2"},
    )
    _kv.wait_ready(client, mount)
    config = {k: v for k, v in (header.get("config") or {}).items() if k != "custom_metadata" and v is not None}
    if config:
        call(f"configuring {mount}", client.secrets.kv.v2.configure, mount_point=mount, **config)
