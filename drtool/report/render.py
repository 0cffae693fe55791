"""Writing one report three ways: JSON for machines, Markdown for a PR comment or ticket, HTML for a person.

The HTML file is self-contained (inline CSS and SVG, no scripts, no external assets), so it can be
attached, mailed or opened from an air-gapped bastion. Each file is written to a temporary name and
renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from drtool.errors import UsageError
from drtool.report import svg, view
from drtool.report.markdown import to_markdown

env = Environment(loader=PackageLoader("drtool.report", "templates"), autoescape=select_autoescape(["html"]))


def to_html(report: Mapping[str, Any]) -> str:
    run = report.get("run") or {}
    independence = report.get("independence") or {}
    domain = independence.get("domain") or {}
    nodes = view.dag_nodes(report)
    return env.get_template("report.html").render(
        title=view.title(report),
        plan=report.get("plan") or {},
        backup=report.get("backup") or {},
        generated=independence.get("generated"),
        verdicts=view.verdicts(report),
        colours=svg.COLOURS,
        run=run,
        steps=view.step_rows(run),
        left_out=view.left_out_rows(run),
        objectives=view.objective_rows(run),
        checks=view.check_rows(report),
        independence=independence,
        facts=sorted((domain.get("facts") or {}).items()),
        evidence=domain.get("evidence") or {},
        timeline_svg=Markup(timeline(report)) if run else "",
        service=view.service_rows(run),
        training=view.training_rows(run),
        objectives_svg=Markup(svg.objectives_svg(view.objective_rows(run))) if run else "",
        dag_svg=Markup(svg.dag_svg(nodes)) if nodes else "",
    )


def timeline(report: Mapping[str, Any]) -> str:
    """The steps, the plan's timed checks, and the two recovery times as lines (docs/reports.md)."""
    run = report.get("run") or {}
    rto = run.get("rto") or {}
    checks = [c for c in report.get("checks") or [] if c.get("step") == "plan" and "started_s" in c]
    marks = {"restore steps done": rto.get("restored_s"), "in service": rto.get("service_s")}
    return svg.timeline_svg(run.get("steps") or [], checks=checks, marks=marks)


def write_report(report: Mapping[str, Any], out_dir: Path, basename: str) -> dict[str, Path]:
    """Write ``basename``.json, .md and .html into ``out_dir``; returns format -> path."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report folder {out_dir}: {exc.strerror}", "choose another --out") from None
    rendered = {
        "json": json.dumps(report, indent=2, default=str) + "\n",
        "md": to_markdown(report),
        "html": to_html(report),
    }
    return {fmt: write_atomic(out_dir / f"{basename}.{fmt}", text) for fmt, text in rendered.items()}


def write_atomic(path: Path, text: str) -> Path:
    """``text`` into ``path`` through a temporary name, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write report {path}: {exc.strerror}", "check the folder's permissions") from None
    return path
