"""`drtool import velero`: bring a Velero backup into the store (drtool/velero/, docs/velero.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from drtool.cli.state import console, print_json, progress, state

app = typer.Typer(help="Bring backups made by other tools into the store.", no_args_is_help=True)


@app.command("velero")
def velero(
    ctx: typer.Context,
    backup: Annotated[str, typer.Argument(help="The Velero backup's name (`velero backup get`).")],
    location: Annotated[
        str,
        typer.Option(
            "--from",
            help="The BackupStorageLocation's bucket and prefix as s3://bucket/prefix (AWS_* settings, "
            "AWS_ENDPOINT_URL for MinIO), or a local copy of it.",
        ),
    ],
    source_server: Annotated[
        str | None, typer.Option(help="The source cluster's API server URL (Velero does not record it).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Tag the backup (repeatable).")] = None,
    backup_set: Annotated[str | None, typer.Option("--set", help="Name of the backup set.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Import a Completed Velero backup as a kubernetes backup; refused ones write nothing.
    Example: drtool import velero nightly-20261205 --from s3://velero/cluster-a"""
    from drtool.velero.importer import import_backup

    app_state = state(ctx)
    repo = app_state.open_repo()
    with progress() as prog:
        imported = import_backup(
            repo, location, backup, backup_set=backup_set, tags=tag or [], source_server=source_server, progress=prog
        )
    app_state.open_catalog().record(imported.manifest)
    meta = imported.manifest.plugins["kubernetes"].meta
    if as_json:
        print_json({"backup": imported.manifest.id, "objects": meta["objects"], "imported_from": meta["imported_from"]})
        return
    p = imported.provenance
    console.print(
        f"backup [bold]{imported.manifest.id}[/]: Velero backup {p.backup} (location {p.location or '?'}, "
        f"format {p.format_version}, completed {p.completed}), {meta['objects']} object(s) as the kubernetes plugin's"
    )
    for line in imported.not_captured:
        console.print(f"  not in the Velero backup: {line}")
