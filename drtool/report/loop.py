"""One page for `drtool demo`'s loop: the first rehearsal, what closed its gaps, the rehearsal after, side by side.

The two rehearsal reports stay as they are (docs/reports.md); this page puts their verdicts, objectives,
steps and independence counts next to each other, follows every finding that was inside the failure domain
the first time to what it became the second time (remediated by which step and how, or waived and why), and
shows the change made in between (the cut-over values, the waivers). Written as ``demo-loop.json`` and one
self-contained ``demo-loop.html`` in the folder of the two reports, which it links to by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from drtool.report import view
from drtool.report.render import env, write_atomic
from drtool.report.svg import COLOURS

BASENAME = "demo-loop"
STATUSES = ("inside", "unknown", "waived", "remediated", "independent")


def loop_report(
    rehearsals: Sequence[tuple[Mapping[str, Any], Mapping[str, Path]]],
    followup: Mapping[str, Any] | None,
    summary: Mapping[str, Any],
) -> dict[str, Any]:
    """The page's data: each rehearsal summarised, the first one's inside findings followed, the change."""
    first = rehearsals[0][0] if rehearsals else {}
    return {
        "kind": "demo-loop",
        **summary,
        "followup": followup,
        "rehearsals": [_summary(report, paths) for report, paths in rehearsals],
        "steps": _steps([r for r, _ in rehearsals]),
        "findings": _followed(first, [r for r, _ in rehearsals[1:]]),
    }


def _summary(report: Mapping[str, Any], paths: Mapping[str, Path]) -> dict[str, Any]:
    run = report.get("run") or {}
    independence = report.get("independence") or {}
    checks = report.get("checks") or []
    statuses = [s.get("status") for s in run.get("steps") or []]
    return {
        "plan": (report.get("plan") or {}).get("path"),
        "report": Path(paths["html"]).name,
        "verdicts": view.verdicts(report),
        "objectives": [o for o in view.objective_rows(run) if o["name"] in ("RTO", "RPO")],  # per plugin: its report
        "steps": {s: statuses.count(s) for s in ("ok", "skipped", "failed", "refused") if s in statuses},
        "checks": {"passed": sum(1 for c in checks if c.get("ok")), "total": len(checks)},
        "independence": {"verdict": independence.get("verdict"), "counts": independence.get("counts") or {}},
    }


def _steps(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per step: its plugin and, per rehearsal, its status and time."""
    rows: dict[str, dict[str, Any]] = {}
    for i, report in enumerate(reports):
        for step in view.step_rows(report.get("run") or {}):
            row = rows.setdefault(step["id"], {"id": step["id"], "uses": step.get("uses"), "runs": [{}] * len(reports)})
            row["runs"][i] = {"status": step.get("status"), "took": step["duration"], "why": step.get("summary")}
    return list(rows.values())


def _followed(first: Mapping[str, Any], later: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each finding the first rehearsal judged inside the failure domain, and what it became in the later ones."""
    out = []
    for f in (first.get("independence") or {}).get("findings") or []:
        if f["status"] != "inside":
            continue
        after = []
        for report in later:
            same = next(
                (g for g in (report.get("independence") or {}).get("findings") or [] if _same(f, g)),
                None,
            )
            after.append({"status": same["status"], "how": _how(same)} if same else {"status": "gone", "how": ""})
        out.append({"address": f["address"], "purpose": f["purpose"], "evidence": f["evidence"], "after": after})
    return out


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a["address"] == b["address"] and a["purpose"] == b["purpose"]


def _how(finding: Mapping[str, Any]) -> str:
    if finding.get("remedy"):
        return f"step {finding['remedy']['step']}: {finding['remedy']['how']}"
    if finding.get("waiver"):
        return f"waived: {finding['waiver']['reason']}"
    return finding.get("detail") or ""


def write_loop_report(
    rehearsals: Sequence[tuple[Mapping[str, Any], Mapping[str, Path]]],
    followup: Mapping[str, Any] | None,
    summary: Mapping[str, Any],
    out_dir: Path,
) -> Path:
    """Write ``demo-loop.json`` and ``demo-loop.html`` into ``out_dir``; returns the HTML's path."""
    data = loop_report(rehearsals, followup, summary)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / f"{BASENAME}.json", json.dumps(data, indent=2, default=str) + "\n")
    html = env.get_template("loop.html").render(page=data, colours=COLOURS, statuses=STATUSES)
    return write_atomic(out_dir / f"{BASENAME}.html", html)
