"""`drtool key`: the slots that wrap the store's master key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.state import console, print_json, state
from drtool.errors import UsageError

app = typer.Typer(help="Manage key slots: passphrases, key files, recovery shares.", no_args_is_help=True)


@app.command("list")
def list_slots(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List key slots (no credentials needed: slots hold only wrapped keys). Slots that no credential will
    be tried on (malformed, unknown version, KDF settings out of bounds) are listed with the reason."""
    from drtool.backends import open_backend
    from drtool.crypto import slots
    from drtool.repo.repository import Repository

    backend = open_backend(state(ctx).settings.require_store())
    Repository.read_config(backend)
    found, rejected = Repository.slot_listing(backend)
    summaries = [s.summary() | {"ignored": slots.check_slot(s)} for s in found]
    summaries += [{"id": slot_id, "ignored": why} for slot_id, why in rejected.items()]
    if as_json:
        print_json(summaries)
        return
    table = Table("id", "kind", "label", "created", "shares", "ignored")
    for s in summaries:
        row = (s["id"], s.get("kind", ""), s.get("label", ""), s.get("created", ""), s.get("shares", ""))
        table.add_row(*row, f"[red]{s['ignored']}[/]" if s["ignored"] else "")
    console.print(table)


@app.command()
def status(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The store's current key generation and key check, its owner key, and whether the credential given
    opens the current key: what a CronJob's DRTOOL_EXPECT_KEY_CHECK and _GENERATION must say."""
    from drtool.crypto.owner import fingerprint
    from drtool.repo import trust

    repo = state(ctx).open_repo()
    decision = trust.of_store(repo.backend)
    info = {
        "store_id": repo.config.store_id,
        "generation": repo.trust.generation,
        "key_check": repo.key.key_check,
        "retired_by": repo.trust.retired_by,
        "owner_key": fingerprint(repo.trust.owner_key) if repo.trust.owner_key else None,
        "owner_credential": repo.owner is not None,
        "why": decision.why(),
    }
    if as_json:
        print_json(info)
        return
    state_line = f"RETIRED by {info['retired_by']}" if info["retired_by"] else "current"
    console.print(f"store {info['store_id']}: key generation {info['generation']} ({state_line})")
    console.print(f"owner key: {info['owner_key'] or 'none (a store made before owner keys)'}; {info['why']}")
    if not info["retired_by"]:
        console.print("a backup CronJob of this key expects, in its environment:")
        typer.echo(f"DRTOOL_EXPECT_KEY_CHECK={info['key_check']}\nDRTOOL_EXPECT_KEY_GENERATION={info['generation']}")


@app.command("owner-init")
def owner_init(ctx: typer.Context) -> None:
    """Give a store made before owner keys its owner key: from now on only a key record it signs makes a
    new key generation (a rotation by the CronJob's key file is ignored). Needs the passphrase (or recovery
    shares) and a passphrase for the new owner slot (DRTOOL_NEW_PASSPHRASE[_FILE]; may be the same one);
    the slot that opened the store is then removed, so the passphrase opens the owner key."""
    from drtool.repo.upgrade import give_owner_key

    repo = state(ctx).open_repo()
    done = give_owner_key(repo, _new_passphrase())
    console.print(
        f"store {repo.config.store_id}: owner key {done.fingerprint} signs key rotations after generation "
        f"{repo.trust.generation}; new owner slot {done.slot.id}"
        + (f", removed slot {done.removed}" if done.removed else "")
    )


@app.command()
def add(
    ctx: typer.Context,
    passphrase: Annotated[
        bool,
        typer.Option(
            "--passphrase",
            help="Add a passphrase slot (read from DRTOOL_NEW_PASSPHRASE, DRTOOL_NEW_PASSPHRASE_FILE or a prompt).",
        ),
    ] = False,
    keyfile: Annotated[Path | None, typer.Option(help="Add a key-file slot and write the new key file here.")] = None,
    label: Annotated[str | None, typer.Option(help="A note shown by `key list`.")] = None,
) -> None:
    """Add a key slot, unlocking the store with an existing credential."""
    from drtool.crypto import slots
    from drtool.files import create_private, refuse_existing

    if passphrase == bool(keyfile):
        raise UsageError("give exactly one of --passphrase or --keyfile PATH")
    repo = state(ctx).open_repo()
    if keyfile:
        refuse_existing(keyfile)
        text, secret = slots.new_keyfile_text(repo.key)
        slot = slots.keyfile_slot(repo.key, secret, label or f"key file {keyfile.name}")
        create_private(keyfile, text)
    else:
        new = _new_passphrase()
        slot = slots.passphrase_slot(repo.key, new, label or "passphrase", owner=repo.owner)
    repo.add_slot(slot)
    console.print(f"added {slot.kind} slot {slot.id}")


def _new_passphrase() -> str:
    import os

    from drtool.config import passphrase_from_env

    saved = {k: os.environ.get(k) for k in ("DRTOOL_PASSPHRASE", "DRTOOL_PASSPHRASE_FILE")}
    try:
        for src, dst in (
            ("DRTOOL_NEW_PASSPHRASE", "DRTOOL_PASSPHRASE"),
            ("DRTOOL_NEW_PASSPHRASE_FILE", "DRTOOL_PASSPHRASE_FILE"),
        ):
            os.environ.pop(dst, None)
            if os.environ.get(src):
                os.environ[dst] = os.environ[src]
        new = passphrase_from_env("New passphrase: ", confirm=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not new:
        raise UsageError("no new passphrase given", "set DRTOOL_NEW_PASSPHRASE or DRTOOL_NEW_PASSPHRASE_FILE")
    return new


@app.command()
def remove(ctx: typer.Context, slot_id: Annotated[str, typer.Argument(help="Slot id from `drtool key list`.")]) -> None:
    """Remove a key slot (revokes that passphrase, key file, or every share of a recovery set)."""
    repo = state(ctx).open_repo()
    repo.remove_slot(slot_id)
    console.print(f"removed key slot {slot_id}")


@app.command("recovery-shares")
def recovery_shares(
    ctx: typer.Context,
    threshold: Annotated[int, typer.Option("--threshold", "-k", help="Shares needed to recover.")] = 3,
    count: Annotated[int, typer.Option("--count", "-n", help="Shares printed.")] = 5,
    out: Annotated[
        Path | None, typer.Option(help="Write the shares to this file (0600) instead of the terminal.")
    ] = None,
) -> None:
    """Create a k-of-n recovery slot and print its shares once, for offline keepers."""
    from drtool.crypto import slots
    from drtool.files import create_private, refuse_existing

    if not 2 <= threshold <= count <= 16:
        raise UsageError("need 2 <= threshold <= count <= 16")
    if out:
        refuse_existing(out)  # before the slot exists: its shares must not be lost
    repo = state(ctx).open_repo()
    slot, shares = slots.recovery_slot(repo.key, threshold, count, owner=repo.owner)
    repo.add_slot(slot)
    text = "\n".join(shares) + "\n"
    if out:
        create_private(out, text)
        console.print(f"wrote {count} shares of recovery slot {slot.id} to {out}")
    else:
        console.print(
            f"recovery slot {slot.id}: any {threshold} of these {count} shares open the store. "
            "Give each to a different keeper; they are not shown again."
        )
        typer.echo(text, nl=False)


@app.command()
def rotate(
    ctx: typer.Context,
    passphrase: Annotated[
        bool,
        typer.Option(
            "--passphrase",
            help="Open the new key with a new passphrase (DRTOOL_NEW_PASSPHRASE[_FILE] or a prompt).",
        ),
    ] = False,
    keyfile: Annotated[Path | None, typer.Option(help="Open the new key with a new key file, written here.")] = None,
    lock_wait: Annotated[float, typer.Option(help="Seconds to wait for running backups to finish.")] = 300.0,
) -> None:
    """Replace the store's master key for everything written from now on; every old slot is removed.
    Needs the store owner's credential (the passphrase or recovery shares, never a key file) and, in a store
    with an owner key, a new passphrase (its slot keeps the owner key).

    Old credentials (removed slots, old shares and key files) can read nothing written after this. They
    keep opening what was written before wherever a copy of their slot survives (a versioned bucket).
    Example: DRTOOL_NEW_PASSPHRASE_FILE=new-pw drtool key rotate --passphrase --keyfile cronjob.key"""
    from drtool.crypto import slots
    from drtool.files import create_private, refuse_existing
    from drtool.repo.rotate import rotate as rotate_key

    if not passphrase and not keyfile:
        raise UsageError("give --passphrase and/or --keyfile PATH for the new key", "old credentials will not open it")
    if keyfile:
        refuse_existing(keyfile)
    repo = state(ctx).open_repo()
    new_passphrase = _new_passphrase() if passphrase else None
    _, secret = slots.new_keyfile_text() if keyfile else (None, None)
    done = rotate_key(repo, passphrase=new_passphrase, keyfile_secret=secret, lock_wait=lock_wait)
    if keyfile and secret:
        create_private(keyfile, slots.keyfile_text(secret, done.repo.key))
    console.print(
        f"rotated store {repo.config.store_id} to key generation {done.generation}: new slot(s) "
        f"{', '.join(s.id for s in done.added)}; removed {len(done.removed)} old slot(s)"
    )
    for slot_id, why in done.kept.items():
        console.print(
            f"[yellow]could not remove slot {slot_id} ({why}): its credential still opens the retired key, which "
            "reads backups written before now and nothing after[/]"
        )
    console.print(
        "recovery shares of the old key no longer open the store: print new ones with `drtool key recovery-shares`"
    )
    console.print(
        f"backup CronJobs of this store now expect DRTOOL_EXPECT_KEY_CHECK={done.repo.key.key_check} and "
        f"DRTOOL_EXPECT_KEY_GENERATION={done.generation}, with the new key file"
    )
