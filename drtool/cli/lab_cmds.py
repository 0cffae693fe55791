"""`drtool lab`: real servers on this machine for trying drtool, rehearsals and tests."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from drtool.cli.state import console
from drtool.lab.components import KINDS
from drtool.lab.lab import Lab

app = typer.Typer(help="Start and stop lab platforms built from real components.", no_args_is_help=True)


@app.command()
def up(
    name: Annotated[str, typer.Option("--name", help="Lab name.")] = "source",
    with_: Annotated[
        list[str] | None, typer.Option("--with", help=f"Components ({', '.join(KINDS)}); default etcd.")
    ] = None,
) -> None:
    """Start a lab (components already running are left alone)."""
    lab = Lab.load(name) if name in Lab.names() else Lab(name)
    lab.up(with_ or ["etcd"])
    console.print(f"lab {name} is up")
    _print_components(lab)


@app.command()
def down(name: Annotated[str, typer.Argument(help="Lab name.")]) -> None:
    """Stop a lab and delete its data."""
    Lab.load(name).down()
    console.print(f"lab {name} is down")


@app.command()
def status() -> None:
    """Every lab and whether its servers answer."""
    names = Lab.names()
    if not names:
        console.print("no labs; start one with `drtool lab up`")
    for name in names:
        console.print(f"[bold]{name}[/]")
        _print_components(Lab.load(name))


@app.command()
def env(name: Annotated[str, typer.Argument(help="Lab name.")]) -> None:
    """Print shell variables that point clients at the lab: eval "$(drtool lab env source)"."""
    for key, value in Lab.load(name).env().items():
        typer.echo(f"export {key}={value}")


def _print_components(lab: Lab) -> None:
    table = Table("component", "kind", "address", "state")
    for cname, comp in lab.components.items():
        table.add_row(cname, comp.kind, comp.describe(), "[green]up[/]" if comp.healthy() else "[red]down[/]")
    console.print(table)
