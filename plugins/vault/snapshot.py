"""Restore a raft snapshot into a fresh OpenBao/Vault and unseal it with the ORIGINAL keys from drtool's escrow.

A fresh node is initialized with throwaway keys (held in memory only) and the source's share count and
threshold, unsealed with them, and handed the snapshot (``sys/storage/raft/snapshot-force``: the snapshot
comes from another cluster, so its keyring differs). The node then holds the source's barrier, seals
itself, and opens only with the source's unseal keys — taken from the escrow in the store, never from the
failed cluster. Its tokens, policies and secrets are the source's from then on.

"Nothing half-done": a wrong key is only found out by unsealing, after the target's storage was
replaced. So by default the whole procedure first runs against a throwaway local OpenBao (``trial``),
and the target is touched only when the trial unsealed; a wrong key then raises WrongKey while the
target is still uninitialized.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import hvac
import requests
from hvac import exceptions as hvac_errors

from drtool.binaries import bao_binary
from drtool.errors import SourceError, UsageError, WrongKey
from drtool.plugin.contract import RestoreContext

from .backup import SNAPSHOT
from .client import active, call, health, raw, wait_for
from .escrow import Escrow

BLOCK = 1 << 20


def _unseal(client: hvac.Client, keys: tuple[str, ...] | list[str], whose: str) -> None:
    call("resetting unseal progress", client.sys.submit_unseal_key, reset=True)
    for key in keys:
        try:
            status = client.sys.submit_unseal_key(key=key)
        except hvac_errors.InvalidRequest as exc:  # Vault's answer to a key that does not fit
            reason = "; ".join(str(e) for e in exc.errors or []) or str(exc)
            call("resetting unseal progress", client.sys.submit_unseal_key, reset=True)
            raise WrongKey(
                f"{whose} do not unseal the Vault at {client.url}: {reason.splitlines()[0]}",
                "the escrowed keys must be the unseal keys of the cluster the snapshot came from",
            ) from None
        except (hvac_errors.VaultError, requests.RequestException) as exc:
            raise SourceError(f"unsealing the Vault at {client.url} failed: {type(exc).__name__}: {exc}") from None
        if not status.get("sealed"):
            return
    raise WrongKey(f"{whose} are fewer than the Vault at {client.url} needs", "escrow at least the threshold of keys")


def _stream(ctx: RestoreContext) -> Iterator[bytes]:
    with ctx.open(SNAPSHOT) as src:
        while block := src.read(BLOCK):
            yield block


def restore_fresh(client: hvac.Client, ctx: RestoreContext, escrow: Escrow, seal: Mapping[str, Any]) -> None:
    """Initialize ``client``'s uninitialized node, force-restore the snapshot, unseal with the escrow."""
    init = call(
        f"initializing {client.url}",
        client.sys.initialize,
        secret_shares=int(seal["shares"]),
        secret_threshold=int(seal["threshold"]),
    )
    _unseal(client, init["keys_base64"], "the throwaway keys")
    wait_for(client, active, "active")
    client.token = init["root_token"]
    call(
        f"restoring the snapshot into {client.url}",
        raw(client).post,
        "/v1/sys/storage/raft/snapshot-force",
        data=_stream(ctx),
        headers={"Content-Type": "application/octet-stream"},
    )
    client.token = None
    wait_for(client, lambda s: s.get("sealed"), "sealed after the restore")
    _unseal(client, escrow.unseal_keys, f"the escrowed unseal keys (from {escrow.held_in})")
    wait_for(client, active, "active after unsealing")


def trial(ctx: RestoreContext, escrow: Escrow, seal: Mapping[str, Any], target: str) -> None:
    """The whole restore against a throwaway local OpenBao, so a bad snapshot or key fails before the target."""
    from drtool.servers.openbao import OpenBaoServer  # a throwaway server, for this trial only

    bao_binary()
    with tempfile.TemporaryDirectory(prefix="drtool-vault-trial-") as tmp:
        server = OpenBaoServer(name="drtool-trial", dir=tmp, initialize=False)
        try:
            server.start()
            restore_fresh(hvac.Client(url=server.address), ctx, escrow, seal)
        except WrongKey as exc:
            raise WrongKey(f"{exc.message} (a trial restore; {target} was not touched)", exc.hint) from None
        finally:
            server.stop()


def run(
    client: hvac.Client, ctx: RestoreContext, escrow: Escrow, meta: Mapping[str, Any], with_trial: bool
) -> tuple[bool, str]:
    """Restore into the target; (changed, what happened). A target holding this cluster already is left alone."""
    status = health(client)
    if status.get("initialized"):
        if status.get("sealed"):
            try:
                _unseal(client, escrow.unseal_keys, "the escrowed unseal keys")
            except WrongKey:
                raise _initialized(client.url) from None
            status = wait_for(client, active, "active")
        if status.get("cluster_id") and status.get("cluster_id") == meta.get("cluster_id"):
            return False, f"already holds cluster {meta.get('cluster_name')}; nothing done"
        raise _initialized(client.url)
    if with_trial:
        trial(ctx, escrow, meta["seal"], client.url)
    restore_fresh(client, ctx, escrow, meta["seal"])
    return True, "snapshot restored and unsealed with the escrowed keys" + (" (after a trial)" if with_trial else "")


def preview(client: hvac.Client, meta: Mapping[str, Any]) -> str:
    """What ``run`` would do, from the target's health alone (a dry run unseals nothing)."""
    status = health(client)
    if not status.get("initialized"):
        return f"would initialize {client.url}, restore the snapshot and unseal it with the escrowed keys"
    if status.get("cluster_id") and status.get("cluster_id") == meta.get("cluster_id"):
        return f"{client.url} already holds cluster {meta.get('cluster_name')}"
    if status.get("sealed"):
        return f"{client.url} is initialized and sealed: a restore would try the escrowed keys, and refuse if they fail"
    raise _initialized(client.url)


def _initialized(url: str) -> UsageError:
    return UsageError(
        f"the Vault at {url} is already initialized by another cluster",
        "a snapshot restore needs a fresh, uninitialized OpenBao; or restore with -o mode=kv into it",
    )


def trial_wanted(option: str) -> bool:
    """``trial``: true (a missing bao fails), false, or auto (trial when a bao binary is here)."""
    if option == "auto":
        try:
            bao_binary()
        except SourceError:
            return False
        return True
    return option in ("1", "true", "yes")
