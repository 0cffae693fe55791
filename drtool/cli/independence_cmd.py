"""`drtool verify-independence`: what a plan's restore still needs from the cluster it is meant to replace.

Writes the report as JSON, Markdown and HTML, prints a summary table, and exits ``INSIDE_DOMAIN`` (10) when
something the restore needs lies inside the failure domain and is not waived, so a scheduled job or CI can
gate on it. Unknown dependencies are listed but do not change the exit code: they need a person's look.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from drtool.cli.state import console, state
from drtool.errors import InsideFailureDomain

STYLE = {"inside": "bold red", "unknown": "yellow", "waived": "magenta", "remediated": "cyan", "independent": "green"}


def verify_independence(
    ctx: typer.Context,
    plan_file: Annotated[Path, typer.Option("--plan", help="A restore plan (YAML).")],
    backup: Annotated[str | None, typer.Option("--backup", help="Backup id (default: the plan's source).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the .json, .md and .html report.")] = Path(
        "drtool-reports"
    ),
    values: Annotated[
        Path | None, typer.Option("--values", help="YAML file of variables for ${VAR} in the plan.")
    ] = None,
    resolve: Annotated[
        bool, typer.Option("--resolve/--no-resolve", help="Resolve hostnames to hold their IPs against the domain.")
    ] = True,
) -> None:
    """Judge every dependency of a plan's restore against the backup's failure domain; exit 10 if one is inside.

    Example: drtool verify-independence --plan restore-plans/full-cluster-rebuild.yaml --out reports/
    """
    from drtool.cli.plan_cmds import load_checked  # the analysis and renderer load only for this command
    from drtool.independence.analysis import analyze
    from drtool.plans.source import find_backup
    from drtool.plans.steps import step_target
    from drtool.report.render import write_report

    loaded = load_checked(plan_file, values)
    plan = loaded.require()
    repo = state(ctx).open_repo()
    manifest = repo.find_backup(backup) if backup else find_backup(repo, plan.source)
    result = analyze(plan, repo, manifest, {s.id: step_target(plan, s) for s in plan.steps}, resolve=resolve)
    independence = result.to_dict()
    report = {
        "kind": "independence",
        "plan": {"name": plan.name, "path": str(plan_file)},
        "backup": independence["backup"],
        "independence": independence,
    }
    paths = write_report(report, out, f"independence-{plan.name}-{result.backup_id}")
    _print(independence)
    for fmt, path in paths.items():
        console.print(f"{fmt:>4}: {path}", highlight=False)
    if result.verdict == "fail":
        raise inside_failure_domain(independence, paths["html"])


def inside_failure_domain(independence: dict[str, Any], report: Path) -> InsideFailureDomain:
    """The error for a restore that needs something that dies with the failed cluster."""
    return InsideFailureDomain(
        f"{independence['counts']['inside']} dependency(ies) of the restore lie inside the failure domain",
        f"read {report}; fix them or waive them in the plan (docs/independence.md)",
    )


def _print(independence: dict[str, Any]) -> None:
    table = Table("status", "dependency", "for", "why", title=f"recovery independence: {independence['verdict']}")
    for f in independence["findings"]:
        status = f["status"] + ("" if f["needed"] else " (not needed)")
        purpose = f["purpose"] + (" [BLOCKS RESTORE]" if f["blocks_restore"] and f["status"] != "independent" else "")
        table.add_row(f"[{STYLE[f['status']]}]{status}[/]", f["address"], purpose, f["detail"])
    console.print(table)
    counts = independence["counts"]
    console.print(", ".join(f"{counts[k]} {k}" for k in STYLE), highlight=False)
