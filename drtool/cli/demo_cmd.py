"""`drtool demo`: the README's main command, printed as a short story with timings and the report's path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.rehearse_cmd import print_rehearsal
from drtool.cli.state import console, human_bytes, progress
from drtool.errors import SourceError


def demo(
    scale: Annotated[int, typer.Option(min=1, help="Content size multiplier for every plugin's lab seed.")] = 1,
    workdir: Annotated[Path | None, typer.Option(help="Where the demo keeps its labs, store and catalog.")] = None,
    keep: Annotated[bool, typer.Option(help="Leave the rehearsal's target lab running afterwards.")] = False,
) -> None:
    """Seed a lab, back it up encrypted, stop it, and rehearse full-cluster-rebuild into a fresh lab."""
    from drtool.demo import DEFAULT_WORKDIR, run_demo

    with progress() as prog:
        report = run_demo(
            workdir or DEFAULT_WORKDIR,
            scale=scale,
            keep=keep,
            echo=lambda line: console.print(line, style="dim", highlight=False),
            progress=prog,
        )
    table = Table("step", "seconds", "detail", title="drtool demo")
    for step in report.steps:
        table.add_row(step.name, f"{step.seconds:.2f}", step.detail)
    console.print(table)
    console.print(
        f"backup {report.backup_id}: {human_bytes(report.facts.get('read_bytes', 0))} read, "
        f"{human_bytes(report.facts.get('stored_bytes', 0))} stored (compressed, encrypted)",
        highlight=False,
    )
    if report.rehearsal is not None:
        print_rehearsal(report.rehearsal.report)
        console.print(f"report: {report.rehearsal.paths['html']}", highlight=False)
    console.print(f"labs, store, catalog and the passphrase file are in {report.workdir}", highlight=False)
    if not report.ok:
        raise SourceError(
            "the demo did not end as it should", f"the table above says where; its files are in {report.workdir}"
        )
