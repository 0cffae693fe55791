"""`drtool catalog`: the local cache of what the store holds."""

from __future__ import annotations

import typer

from drtool.cli.state import console, state
from drtool.errors import IntegrityError

app = typer.Typer(
    help="The catalog: a cache of the store's backups, rebuilt from the store alone.", no_args_is_help=True
)


@app.command()
def rebuild(ctx: typer.Context) -> None:
    """Recreate the catalog from the store (on a new machine, or after losing the catalog)."""
    app_state = state(ctx)
    repo = app_state.open_repo()
    result = app_state.open_catalog().sync(repo, rebuild=True)
    console.print(f"catalog rebuilt from {repo.backend.url}: {result.added} backup(s)")
    for backup_id, err in result.unreadable.items():
        console.print(f"[red]could not read manifest {backup_id}: {err}[/]")
    if result.unreadable:
        raise IntegrityError(
            f"{len(result.unreadable)} manifest(s) could not be read", "`drtool check` lists every damaged object"
        )
