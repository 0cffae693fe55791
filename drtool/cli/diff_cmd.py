"""`drtool diff`: what differs between a backup and a live system, for plugins that can tell.

A plugin offers this with the optional ``diff`` hook (``drtool.plugin.contract.DiffSupport``, docs/plugins.md);
the kueue plugin does. The command only prints: the comparison is the plugin's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from drtool.cli.state import console, print_json, state
from drtool.cli.store_cmds import BackupArg, JsonOpt, TargetOpt, parse_pairs
from drtool.errors import Differs, NotFound, UsageError

if TYPE_CHECKING:
    from drtool.plugin.contract import DiffResult


def diff(
    ctx: typer.Context,
    backup_id: BackupArg,
    plugin: Annotated[str, typer.Option("--plugin", "-p", help="Which plugin's view to compare (kueue).")],
    target: TargetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare a backup with a live system; exit 0 when equal, 9 when they differ.

    Example: drtool diff latest --plugin kueue --target kubeconfig=/etc/kubernetes/admin.conf
    """
    from drtool.plugin import settings
    from drtool.plugin.contract import DiffSupport
    from drtool.plugin.manager import get_plugin, load_plugins
    from drtool.repo.restore_context import PluginRestoreContext

    chosen = get_plugin(plugin)
    if not isinstance(chosen, DiffSupport):
        able = sorted(name for name, p in load_plugins().items() if isinstance(p, DiffSupport))
        raise UsageError(
            f"plugin {plugin} cannot compare a backup with a live system", f"diff supports: {', '.join(able)}"
        )
    settings.check(chosen, "target", parse_pairs(target, "target"), "-t")
    repo = state(ctx).open_repo()
    rctx = PluginRestoreContext(repo, repo.find_backup(backup_id), chosen.name)
    if not rctx.artifacts:
        raise NotFound(f"backup {rctx.backup_id} holds nothing from plugin {plugin}", "`drtool show ID` lists it")
    rctx.preflight()  # every chunk present, before the live system is contacted
    result = chosen.diff(rctx, parse_pairs(target, "target"))
    _print(result, as_json)
    if not result.equal:
        raise Differs(f"backup {rctx.backup_id} and the target differ", "the differences are listed above")


def _print(result: DiffResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json())
        return
    console.print(result.summary)
    for title, columns, rows in result.tables():
        table = Table(*columns, title=title)
        for row in rows:
            table.add_row(*row)
        console.print(table)
