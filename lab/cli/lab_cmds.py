"""`drtool lab`: real servers on this machine for trying drtool, rehearsals and tests."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer
from drtool_lab.components import KINDS
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.gomods import KUBE_RELEASES, KUBE_VERSION
from drtool_lab.lab import BARE_KINDS, LIVING_KINDS, OPT_IN_KINDS, Lab
from rich.table import Table

from drtool.cli.state import console
from drtool.errors import UsageError

app = typer.Typer(help="Start and stop lab platforms built from real components.", no_args_is_help=True)


@app.command()
def up(
    name: Annotated[str, typer.Option("--name", help="Lab name.")] = "source",
    with_: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            help=f"Components ({', '.join(KINDS)}); default {' + '.join(LIVING_KINDS)}. "
            f"Opt-in operators alone ({', '.join(OPT_IN_KINDS)}) are added to the default.",
        ),
    ] = None,
    bare: Annotated[
        bool, typer.Option("--bare", help=f"Only {' + '.join(BARE_KINDS)}: objects are stored, nothing runs.")
    ] = False,
    kubernetes: Annotated[
        str | None,
        typer.Option(
            "--kubernetes",
            help=f"Kubernetes release of the API server ({', '.join([KUBE_VERSION, *KUBE_RELEASES])}; "
            f"default {KUBE_VERSION}). Another release runs bare.",
        ),
    ] = None,
) -> None:
    """Start a lab (components already running are left alone; what a component needs is started too)."""
    if bare and with_:
        raise UsageError("--bare and --with both choose the components", "give one of them")
    lab = Lab.load(name) if name in Lab.names() else Lab(name, kubernetes=kubernetes or KUBE_VERSION)
    if kubernetes and kubernetes != lab.kubernetes:
        raise UsageError(
            f"lab {name} runs Kubernetes {lab.kubernetes}, not {kubernetes}",
            f"`drtool lab down {name}` first, or choose another --name",
        )
    living = LIVING_KINDS if lab.kubernetes == KUBE_VERSION else BARE_KINDS
    if with_ and set(with_) <= set(OPT_IN_KINDS):
        with_ = [*living, *with_]
    lab.up(with_ or (BARE_KINDS if bare else living))
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
def doctor() -> None:
    """Every lab component's programs: found or missing, version, and how a missing one is obtained."""
    from drtool_lab.doctor import doctor as examine

    findings = examine()
    table = Table("component", "program", "state", "version", "from", "path, or how it is obtained")
    for f in findings:
        p = f.provision
        state = "[green]found[/]" if p.found else "[yellow]missing[/]"
        table.add_row(f.component, p.program, state, p.version, f"{p.how}: {p.source}", p.found or p.obtain)
    console.print(table)
    missing = sum(1 for f in findings if not f.provision.found)
    console.print(
        f"{len(findings) - missing} of {len(findings)} programs found"
        + (f"; {missing} missing (Go servers are built on first use, the rest as shown)" if missing else "")
    )


@app.command()
def env(name: Annotated[str, typer.Argument(help="Lab name.")]) -> None:
    """Print shell variables that point clients at the lab: eval "$(drtool lab env source)"."""
    for key, value in Lab.load(name).env().items():
        typer.echo(f"export {key}={shlex.quote(value)}")


@app.command()
def seed(
    name: Annotated[str, typer.Argument(help="Lab name.")],
    plugin: Annotated[
        list[str] | None,
        typer.Option("--plugin", "-p", help="Seed only these plugins (default: all with lab support)."),
    ] = None,
    scale: Annotated[int, typer.Option("--scale", min=1, help="Content size multiplier for every plugin.")] = 1,
    objects: Annotated[
        int | None,
        typer.Option("--objects", min=0, help="Only the Kubernetes seed, scaled to about this many objects."),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Concurrent API requests (with --objects).")] = 8,
) -> None:
    """Fill a lab with realistic content through every installed plugin's lab support (docs/lab.md)."""
    lab = Lab.load(name)
    if objects is not None:
        _seed_kube_objects(lab, objects, workers)
        return
    from drtool_lab.targets import lab_plugins, seed_sources

    plugins = lab_plugins(plugin)
    sources = seed_sources(lab, plugins, scale, echo=lambda line: console.print(line, highlight=False))
    console.print(f"lab {name}: seeded {', '.join(sources)}; `drtool lab status` lists its servers", highlight=False)


def _seed_kube_objects(lab: Lab, objects: int, workers: int) -> None:
    from drtool_lab import kube_seed  # loads YAML and the fixtures: only when seeding

    server = lab.first(KubeApiserver.kind)
    if not isinstance(server, KubeApiserver) or not server.healthy():
        raise UsageError(
            f"lab {lab.name} has no running kube-apiserver", f"start one with `drtool lab up --name {lab.name}`"
        )
    result = kube_seed.seed(server.access(), objects, workers=workers, progress=lambda msg: console.print(msg))
    table = Table("kind", "objects")
    for kind, count in sorted(result.counts.items()):
        table.add_row(kind, str(count))
    console.print(table)
    console.print(
        f"{result.total} objects ({result.created} created, {result.existing} already there) "
        f"in {result.seconds:.1f}s: {result.rate:.0f} objects/s"
        + (f"; bulk {result.bulk} at {result.bulk_rate:.0f} objects/s" if result.bulk else "")
    )


def _print_components(lab: Lab) -> None:
    table = Table("component", "kind", "address", "state")
    for cname, comp in lab.components.items():
        table.add_row(cname, comp.kind, comp.describe(), "[green]up[/]" if comp.healthy() else "[red]down[/]")
    console.print(table)
