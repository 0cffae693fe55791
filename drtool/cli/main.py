"""The `drtool` entry point: global options, command groups, and the one place errors become exit codes."""

from __future__ import annotations

import copy
import sys
from importlib.metadata import entry_points
from importlib.util import find_spec
from typing import Annotated

import typer

from drtool import __version__, log
from drtool.cli import (
    audit_cmd,
    catalog_cmds,
    diff_cmd,
    drill_cmds,
    follow_cmds,
    import_cmds,
    independence_cmd,
    key_cmds,
    plan_cmds,
    prune_cmd,
    rehearse_cmd,
    repair_cmd,
    runs_cmds,
    schedule_cmds,
    shard_cmds,
    standby_cmds,
    store_cmds,
)
from drtool.cli.entry import command_word
from drtool.cli.state import AppState, console, print_json
from drtool.errors import INTERRUPTED, DrtoolError
from drtool.memory import fewer_collections, limit_malloc_arenas

COMMANDS = "drtool.commands"
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
    log_level: Annotated[
        str | None, typer.Option(help="DEBUG, INFO, WARNING or ERROR, to stderr (overrides DRTOOL_LOG_LEVEL).")
    ] = None,
) -> None:
    log.setup(log_level)
    ctx.obj = AppState(config=config, store=store, catalog=catalog)


@app.command()
def version() -> None:
    """Print drtool's version."""
    typer.echo(__version__)


@app.command()
def plugins(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    describe: Annotated[
        str | None, typer.Option("--describe", help="A plugin's source, target and option keys (docs/plugins.md).")
    ] = None,
) -> None:
    """List installed plugins (entry-point group drtool.plugins)."""
    from drtool.plugin.manager import get_plugin, registry

    if describe:
        from rich.markup import escape
        from rich.table import Table

        from drtool.plugin.settings import settings_table

        described = settings_table(get_plugin(describe))
        if as_json:
            print_json(described)
            return
        for kind, rows in described["settings"].items():
            table = Table("key", "type", "default", "meaning", title=f"{describe}: {kind} keys", title_justify="left")
            for row in rows:
                table.add_row(*(escape(row[k]) for k in ("key", "type", "default", "description")))
            console.print(table)
        return
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
app.command("verify-independence")(independence_cmd.verify_independence)
app.add_typer(key_cmds.app, name="key")
app.add_typer(catalog_cmds.app, name="catalog")
app.add_typer(schedule_cmds.app, name="schedule")
app.add_typer(shard_cmds.app, name="shard")
prune_cmd.register(app)
app.add_typer(repair_cmd.app, name="repair")
app.add_typer(plan_cmds.app, name="plan")
app.add_typer(runs_cmds.app, name="runs")
app.command()(rehearse_cmd.rehearse)
app.add_typer(import_cmds.app, name="import")
drill_cmds.register(app)
audit_cmd.register(app)
follow_cmds.register(app)
standby_cmds.register(app)


def _for_command_line(app: typer.Typer, argv: list[str]) -> typer.Typer:
    """The app to run ``argv`` with: when it names one of drtool's own commands, a copy holding that command
    alone (typer builds click's command of every registered one, each callback's signature inspected, about
    0.1 CPU-s, before it runs one); otherwise the whole app with the commands other installed packages add
    through the ``drtool.commands`` entry-point group: the lab's ``lab`` and ``demo`` (~0.15 CPU-s to import,
    so only then). An entry whose package is not installed is skipped: the container image is built without
    the lab, so its drtool has none of them."""
    word = command_word(argv)
    if word in _own_commands(app):
        one = copy.copy(app)
        one.registered_commands = [c for c in app.registered_commands if _name(c) == word]
        one.registered_groups = [g for g in app.registered_groups if g.name == word]
        return one
    for ep in entry_points(group=COMMANDS):
        if find_spec(ep.module.partition(".")[0]) is not None:
            ep.load()(app)
    return app


def _name(command: typer.models.CommandInfo) -> str:
    """A command's name, as typer derives it."""
    return command.name or typer.main.get_command_name(command.callback.__name__ if command.callback else "")


def _own_commands(app: typer.Typer) -> set[str]:
    """The names of drtool's own commands and groups."""
    return {_name(c) for c in app.registered_commands} | {g.name for g in app.registered_groups if g.name}


def main() -> None:
    run = _for_command_line(app, sys.argv[1:])
    limit_malloc_arenas()  # before any thread: bounded restore memory (drtool/memory.py)
    fewer_collections()  # the imports are done: CPU per GiB of the data path (drtool/memory.py)
    try:
        code = run(standalone_mode=False)  # returns typer.Exit's code instead of raising it
        if isinstance(code, int):
            sys.exit(code)
    except DrtoolError as exc:
        sys.stderr.write(f"drtool: error: {exc.one_line()}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("drtool: interrupted\n")
        sys.exit(INTERRUPTED)
    except typer.Abort:
        sys.exit(INTERRUPTED)
    except Exception as exc:  # usage errors arrive here too, from click or from typer's vendored copy of it
        # click is no dependency of drtool: typer >= 0.2x vendors it (its errors are TyperExceptions), older
        # typer imports the real one. Importing it here would fail where only drtool's dependencies are
        # installed (the container image), turning every mistyped option into a traceback.
        click = sys.modules.get("click")
        usage_errors = (typer.TyperException, *((click.ClickException,) if click else ()))
        show = getattr(exc, "show", None)
        if isinstance(exc, usage_errors) and callable(show):
            show()
            sys.exit(2)
        raise
