"""`drtool prune` (retention + chunk garbage collection) and `drtool unlock` (stale store locks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from drtool.cli.state import console, print_json, state
from drtool.errors import UsageError
from drtool.repo.layout import DEFAULT_LOCK_WAIT

if TYPE_CHECKING:
    from drtool.prune import PruneReport


def prune_cmd(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would go and why the rest stays.")] = False,
    backup_set: Annotated[str | None, typer.Option("--set", help="Only this backup set.")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for running backups to finish.")] = DEFAULT_LOCK_WAIT,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Forget backups per each set's `retention:`, then delete chunks no backup needs.

    Example: drtool prune --dry-run --set nightly"""
    from drtool.prune import prune

    app = state(ctx)
    sets = app.settings.backup_sets
    if backup_set is not None and backup_set not in sets:
        raise UsageError(f"no backup set {backup_set!r} in the config", f"known sets: {', '.join(sets) or 'none'}")
    repo = app.open_repo()
    report = prune(
        repo, {n: s.retention for n, s in sets.items()}, only_set=backup_set, dry_run=dry_run, lock_wait=wait
    )
    if not dry_run and report.forgotten:
        app.open_catalog().sync(repo)
    if as_json:
        print_json(report.to_json())
    else:
        _print(report)


def _print(report: PruneReport) -> None:
    verb = "would forget" if report.dry_run else "forgot"
    for name, decisions in report.decisions.items():
        console.print(f"[bold]set {name or '(no set)'}[/]")
        for d in decisions:
            if d.keep:
                mark, why = "[green]keep[/]", "; ".join(d.reasons)
            elif d.backup.id in report.forgotten:
                mark, why = f"[red]{verb}[/]", "; ".join(d.reasons)
            else:  # retention let it go, but its manifest is under Object Lock
                mark, why = "[yellow]kept[/]", "manifest under S3 Object Lock (listed below)"
            console.print(f"  {mark} {d.backup.id}  {why}")
    for name, why in sorted(report.locked_objects.items()):
        console.print(f"[yellow]kept {name}: Object Lock {why}[/]")
    for backup_id, err in report.unreadable_manifests.items():
        console.print(f"[red]manifest {backup_id} unreadable ({err}): no chunk was deleted[/]")
    chunks = "would delete" if report.dry_run else "deleted"
    console.print(
        f"{verb} {len(report.forgotten)} backup(s); {chunks} {report.chunks_deleted} of {report.chunks_present} "
        f"chunk(s); {len(report.locked_objects)} object(s) under Object Lock kept"
    )
    if report.stale_locks_removed:
        console.print(f"removed {len(report.stale_locks_removed)} stale lock(s)")


def unlock(
    ctx: typer.Context,
    remove_all: Annotated[
        bool, typer.Option("--remove-all", help="Remove every lock, live ones too (only when no drtool runs).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Remove stale store locks (expired, or held by a process of this host that is gone)."""
    from drtool.repo.lock import list_locks, remove_stale_locks

    repo = state(ctx).open_repo()
    removed = remove_stale_locks(repo, everything=remove_all)
    remaining = list_locks(repo)
    if as_json:
        print_json({"removed": [lock.id for lock in removed], "remaining": [lock.describe() for lock in remaining]})
        return
    for lock in removed:
        console.print(f"removed {lock.describe()}")
    for lock in remaining:
        console.print(f"still held: {lock.describe()}")
    if not removed and not remaining:
        console.print("no locks")


def register(app: typer.Typer) -> None:
    app.command("prune")(prune_cmd)
    app.command()(unlock)
