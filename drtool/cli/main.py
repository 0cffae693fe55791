"""The `drtool` entry point: global options, command groups, and the one place errors become exit codes."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from drtool import __version__
from drtool.cli import catalog_cmds, demo_cmd, diff_cmd, key_cmds, lab_cmds, store_cmds
from drtool.cli.state import AppState, console, print_json
from drtool.errors import DrtoolError

app = typer.Typer(
    help="Disaster-recovery backup and restore for AI platforms on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global(
    ctx: typer.Context,
    config: Annotated[str | None, typer.Option(help="Config file (default ~/.config/drtool/config.yaml).")] = None,
    store: Annotated[str | None, typer.Option(help="Store URL (overrides DRTOOL_STORE and the config).")] = None,
    catalog: Annotated[
        str | None, typer.Option(help="Catalog path or SQLAlchemy URL (overrides DRTOOL_CATALOG).")
    ] = None,
) -> None:
    ctx.obj = AppState(config=config, store=store, catalog=catalog)


@app.command()
def version() -> None:
    """Print drtool's version."""
    typer.echo(__version__)


@app.command()
def plugins(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List installed plugins (entry-point group drtool.plugins)."""
    from drtool.plugin.manager import registry

    reg = registry()
    if as_json:
        print_json(
            [{"name": p.name, "description": p.description} for p in reg.plugins.values()]
            + [{"name": name, "error": err} for name, err in reg.broken.items()]
        )
        return
    for p in reg.plugins.values():
        console.print(f"[bold]{p.name}[/]  {p.description}")
    for name, err in reg.broken.items():
        console.print(f"[red]{name}  broken: {err}[/]")


store_cmds.register(app)
app.command()(diff_cmd.diff)
app.command()(demo_cmd.demo)
app.add_typer(key_cmds.app, name="key")
app.add_typer(catalog_cmds.app, name="catalog")
app.add_typer(lab_cmds.app, name="lab")


def main() -> None:
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code instead of raising it
        if isinstance(code, int):
            sys.exit(code)
    except DrtoolError as exc:
        sys.stderr.write(f"drtool: error: {exc.one_line()}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("drtool: interrupted\n")
        sys.exit(130)
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here too
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(2)
        raise
