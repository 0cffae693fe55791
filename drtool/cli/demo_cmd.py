"""`drtool demo`: the README's main job, printed as a short story with timings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.state import console, human_bytes, progress


def demo(
    keys: Annotated[int, typer.Option(help="How many Kubernetes-shaped keys to write into the source etcd.")] = 20_000,
    workdir: Annotated[Path | None, typer.Option(help="Where the demo keeps its lab, store and catalog.")] = None,
    keep: Annotated[bool, typer.Option(help="Leave both etcd servers running afterwards.")] = False,
) -> None:
    """Back up a real etcd into a local encrypted store and restore it into a new etcd, verified."""
    from drtool.demo import DEFAULT_WORKDIR, run_demo

    with progress() as prog:
        report = run_demo(
            workdir or DEFAULT_WORKDIR,
            keys=keys,
            keep=keep,
            echo=lambda line: console.print(line, style="dim"),
            progress=prog,
        )
    table = Table("step", "seconds", "detail", title="drtool demo")
    for step in report.steps:
        table.add_row(step.name, f"{step.seconds:.2f}", step.detail)
    console.print(table)
    facts = report.facts
    console.print(
        f"snapshot {human_bytes(facts['snapshot_bytes'])} stored as {human_bytes(facts['stored_bytes'])} "
        f"(compressed, encrypted); the unchanged second backup stored "
        f"{human_bytes(facts['second_stored_bytes'])}"
    )
    for check in report.checks:
        mark = "[green]ok[/]" if check.ok else "[red]FAILED[/]"
        console.print(f"  {mark} {check.name}" + (f" — {check.detail}" if check.detail else ""))
    console.print(f"store, catalog and the passphrase file are in {report.workdir}")
    if not report.ok:
        raise typer.Exit(7)
