"""`drtool repair index`: rebuild a format-2 store's index from its packs (drtool/repair.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from drtool.cli.state import console, print_json, state
from drtool.repo.layout import DEFAULT_LOCK_WAIT

app = typer.Typer(help="Repair what a damaged or tampered store lost.", no_args_is_help=True)


@app.command("index")
def index(
    ctx: typer.Context,
    wait: Annotated[float, typer.Option(help="Seconds to wait for running backups to finish.")] = DEFAULT_LOCK_WAIT,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Rebuild the index from the packs' own headers; index objects there were are superseded (and deleted
    where Object Lock allows). Example: drtool repair index && drtool check --read-data"""
    from drtool.repair import repair_index

    report = repair_index(state(ctx).open_repo(), lock_wait=wait)
    if as_json:
        print_json(report.to_json())
        return
    for pack_id, why in sorted(report.unreadable_packs.items()):
        console.print(f"[red]pack {pack_id[:16]} not indexed from its header: {why}[/]")
    for name, why in sorted(report.kept.items()):
        console.print(f"[yellow]kept {name}: {why} (superseded: ignored from now on)[/]")
    console.print(
        f"indexed {report.blobs_indexed} chunk(s) of {report.packs_read} pack(s) in {len(report.written)} new index "
        f"object(s); {len(report.superseded)} old index object(s) superseded, {len(report.deleted)} object(s) deleted"
    )
