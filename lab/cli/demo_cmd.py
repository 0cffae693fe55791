"""`drtool demo`: the README's main command, printed as a short story, a summary table, and where the report is."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from drtool.cli.state import console, human_bytes
from drtool.errors import SourceError

if TYPE_CHECKING:
    from drtool_lab.demo import DemoReport

    from drtool.progress import Stages


def demo(
    scale: Annotated[int, typer.Option(min=1, help="Content size multiplier for every plugin's lab seed.")] = 1,
    workdir: Annotated[Path | None, typer.Option(help="Where the demo keeps its labs, store and catalog.")] = None,
    keep: Annotated[bool, typer.Option(help="Leave the last rehearsal's target lab running afterwards.")] = False,
    install: Annotated[
        bool,
        typer.Option(
            "--install/--no-install",
            help="As root on Debian, apt-get install the lab's missing Debian packages (said first); "
            "--no-install refuses instead, naming them.",
        ),
    ] = True,
    plugin: Annotated[
        list[str] | None,
        typer.Option("--plugin", "-p", help="Show only these plugins (default: every one with lab support)."),
    ] = None,
) -> None:
    """Seed a lab, back it up encrypted, stop it, rehearse full-cluster-rebuild, close the gaps, rehearse again."""
    from drtool_lab.demo import DEFAULT_WORKDIR, run_demo

    def echo(line: str) -> None:
        console.print(line, style="dim", highlight=False)

    with _progress(echo) as prog:
        where = workdir or DEFAULT_WORKDIR
        report = run_demo(where, scale, keep, install=install, plugins=plugin, echo=echo, progress=prog)
    table = Table("phase", "time", "result", title="drtool demo")
    for phase in report.phases:
        table.add_row(phase.name, f"{phase.seconds:.0f}s", phase.result)
    console.print(table)
    if report.matrix:
        from drtool.drills.matrix import table as matrix_table

        console.print(matrix_table(report.matrix))
    console.print(
        f"backup {report.backup_id}: {human_bytes(report.facts.get('read_bytes', 0))} read, "
        f"{human_bytes(report.facts.get('stored_bytes', 0))} stored (compressed, encrypted)",
        highlight=False,
    )
    for why, names in _grouped(report.left_out).items():
        console.print(f"[yellow]left out[/] {', '.join(names)}: {why}", highlight=False)
    verdict = "[green]PASSED[/]" if report.ok else "[red]FAILED[/]"
    console.print(f"demo {verdict}: {_verdict(report)}", highlight=False)
    console.print(f"labs, store, catalog and the passphrase file are in {report.workdir}", highlight=False)
    if report.report_path is not None:
        console.print(f"report: {report.report_path}", highlight=False, soft_wrap=True)
        console.print(f"open it: {open_command(report.report_path)}", highlight=False, soft_wrap=True)
    if not report.ok:
        hint = f"the table above says where; its files are in {report.workdir}"
        raise SourceError("the demo did not end as it should", hint)


def _progress(echo: Callable[[str], None]) -> AbstractContextManager[Stages]:
    """Bars on a terminal; on a log or a pipe, a line every 15 s saying what runs and for how long."""
    from drtool.progress import LineProgress, RichProgress

    return RichProgress() if sys.stderr.isatty() else LineProgress(echo)


def _grouped(left_out: dict[str, str]) -> dict[str, list[str]]:
    """why -> the plugins left out for it (a machine without Go leaves most of them out for one reason)."""
    out: dict[str, list[str]] = {}
    for name, why in sorted(left_out.items()):
        out.setdefault(why, []).append(name)
    return out


def _verdict(report: DemoReport) -> str:
    final = report.final
    if final is None:
        return "no rehearsal ran"
    counts = (final.report.get("independence") or {}).get("counts") or {}
    restored = "the platform came back, verified" if final.restored else "the last rehearsal did not restore"
    return (
        f"{restored}; {counts.get('inside', 0)} dependencies inside the failed cluster, "
        f"{counts.get('remediated', 0)} remediated by the plan, {counts.get('waived', 0)} waived, "
        f"{counts.get('unknown', 0)} for a person to judge"
    )


def open_command(path: Path) -> str:
    """The one command that opens ``path`` in a browser here."""
    if shutil.which("xdg-open"):
        return f"xdg-open {path}"
    return f"python3 -m webbrowser {path.resolve().as_uri()}"
