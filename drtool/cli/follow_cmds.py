"""`drtool follow` (continuous backup: a full, then deltas, until SIGTERM) and `drtool compact` (fold deltas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from drtool.cli.state import console, print_json, progress, state
from drtool.cli.store_cmds import parse_pairs
from drtool.repo.layout import DEFAULT_FOLLOW_SET

if TYPE_CHECKING:
    from drtool.repo.manifest import Manifest

PluginOpt = Annotated[
    str, typer.Option("--plugin", "-p", help="A plugin with a continuous mode (etcd, kubernetes, kueue).")
]
SetOpt = Annotated[str, typer.Option("--set", help="Backup set the chain belongs to.")]
OptionOpt = Annotated[list[str] | None, typer.Option("--option", "-o", help="Plugin option KEY=VALUE (repeatable).")]


def follow(
    ctx: typer.Context,
    plugin: PluginOpt = "etcd",
    backup_set: SetOpt = DEFAULT_FOLLOW_SET,
    period: Annotated[float | None, typer.Option(help="Seconds between deltas (etcd: 20, kubernetes: 5).")] = None,
    max_events: Annotated[int | None, typer.Option(help="Write a delta once this many events are buffered.")] = None,
    option: OptionOpt = None,
) -> None:
    """Back up continuously: a full backup, then a delta every --period seconds, until SIGTERM (exit 0).

    A backup set of the config with `follow: {...}` gives the plugin, its source and options.
    Example: drtool follow -p etcd --set etcd-prod --period 20"""
    from drtool.follow import FollowSession, run_follow
    from drtool.plugin.manager import get_plugin

    app = state(ctx)
    bset = app.settings.backup_sets.get(backup_set)
    source = app.settings.sources.get(plugin, {})
    options: dict[str, Any] = {}
    if bset is not None and bset.follow is not None:  # a `follow:` set of the config names plugin and options
        plugin, options = bset.plugins[0], dict(bset.follow)
        source = bset.sources_for(app.settings.sources)[plugin]
    options |= parse_pairs(option, "option")
    options |= {k: v for k, v in {"period": period, "max_events": max_events}.items() if v is not None}
    repo = app.open_repo()
    chosen = get_plugin(plugin)

    def announce(manifest: Manifest) -> None:
        chain = manifest.chain
        if chain is not None:
            span = f"{chain.first}..{chain.last}" if manifest.is_delta else f"at {chain.last}"
            console.print(f"{manifest.kind} {manifest.id} seq {chain.seq} {span}", highlight=False)

    session = FollowSession(repo, plugin, backup_set, options, on_link=announce)
    session.install_signal_handlers()
    run_follow(repo, chosen, source, session)
    console.print(f"stopped after {session.links_written} link(s)")


def compact_cmd(
    ctx: typer.Context,
    plugin: PluginOpt = "etcd",
    backup: Annotated[str, typer.Option("--chain", help="'latest' or a backup id of the chain to fold.")] = "latest",
    min_deltas: Annotated[
        int, typer.Option(help="Fold only when at least this many deltas follow the newest full.")
    ] = 1,
    option: OptionOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Fold a chain's deltas into a new full backup, offline (the source is not contacted).

    Example: drtool compact -p etcd --min-deltas 180"""
    from drtool.compact import compact
    from drtool.plugin.manager import get_plugin

    app = state(ctx)
    repo = app.open_repo()
    with progress() as prog:
        result = compact(
            repo,
            get_plugin(plugin),
            ref=backup,
            min_deltas=min_deltas,
            options=parse_pairs(option, "option"),
            progress=prog,
        )
    if result.manifest is not None:
        app.open_catalog().record(result.manifest)
    if as_json:
        print_json(
            {
                "folded": result.manifest.id if result.manifest else None,
                "base": result.base,
                "deltas": result.deltas,
                "reason": result.reason,
            }
        )
    elif result.manifest is None:
        console.print(f"nothing folded: {result.reason}")
    else:
        chain = result.manifest.chain
        assert chain is not None
        console.print(
            f"folded {result.deltas} delta(s) after {result.base} into full {result.manifest.id} "
            f"(revision {chain.last}, chain {chain.base} seq {chain.seq})"
        )


def register(app: typer.Typer) -> None:
    app.command()(follow)
    app.command("compact")(compact_cmd)
