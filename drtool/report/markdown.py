"""The Markdown report: short enough for a pull-request comment or a ticket, complete enough to act on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drtool.report import view

STATUS_MARK = {
    "inside": "❌ inside",
    "unknown": "❓ unknown",
    "waived": "⚠️ waived",
    "remediated": "🔧 remediated",
    "independent": "✅ independent",
}
STATUSES = ("inside", "unknown", "waived", "remediated", "independent")
STEP_MARK = {"ok": "✅ ok", "failed": "❌ failed", "refused": "⛔ refused", "skipped": "⏭ skipped"}


def _cell(value: Any) -> str:
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def to_markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# {view.title(report)}", ""]
    for _, sentence in view.verdicts(report):
        lines.append(f"**{sentence}**  ")
    plan, backup = report.get("plan") or {}, report.get("backup") or {}
    lines += [
        "",
        f"Plan `{plan.get('path') or plan.get('name')}`, backup `{backup.get('id')}` ({backup.get('created')})",
        "",
    ]
    run = report.get("run")
    if run:
        lines += _run(report, run)
    independence = report.get("independence")
    if independence:
        lines += _independence(independence)
    return "\n".join(lines).rstrip() + "\n"


def _run(report: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    lines = ["## Objectives", ""]
    rows = view.objective_rows(run)
    lines += _table(
        ["", "measured", "objective", "result"], [(r["name"], r["measured"], r["objective"], r["result"]) for r in rows]
    )
    lines += [f"Run `{run.get('id')}` into `{run.get('target')}`, {run.get('started')} to {run.get('finished')}", ""]
    lines += ["## Steps", ""]
    steps = view.step_rows(run)
    lines += _table(
        ["step", "plugin", "status", "took", "attempts", "summary"],
        [
            (
                s["id"],
                s.get("uses"),
                STEP_MARK.get(s.get("status"), s.get("status")),
                s["duration"],
                s.get("attempts"),
                s.get("error") or s.get("summary") or "",
            )
            for s in steps
        ],
    )
    left_out = view.left_out_rows(run)
    if left_out:
        lines += ["Left out on purpose (skipped, not failed):", ""]
        lines += _table(["", "name", "why"], left_out)
    refused = [(s["id"], conn) for s in steps for conn in s["refused"]]
    if refused:
        lines += ["### Refused connections (into the failure domain)", ""]
        lines += _table(["step", "connection"], refused)
    lines += _isolation(run)
    checks = report.get("checks") or []
    if checks:
        lines += ["## Checks", ""]
        lines += _table(
            ["step", "check", "result", "detail"],
            [(c.get("step"), c.get("name"), "✅" if c.get("ok") else "❌", c.get("detail")) for c in checks],
        )
    return lines


def _isolation(run: Mapping[str, Any]) -> list[str]:
    isolation = run.get("isolation")
    if not isolation:
        return []
    lines = [
        "### Isolation",
        "",
        f"**{isolation['mode']}** ({isolation.get('why')}): covers {isolation['covers']}.",
        "",
    ]
    if isolation.get("relayed"):
        lines += [f"Relayed into the namespace: {', '.join(isolation['relayed'])}.", ""]
    if isolation.get("blocked"):
        lines += [f"Blocked outside the failure domain: {', '.join(isolation['blocked'])}.", ""]
    pairs = run.get("bug_pairs") or []
    if pairs:
        lines += ["### Bug pairs: refused during the rehearsal, not reported by the analysis", ""]
        lines += _table(["address", "caught by", "steps", "the analysis said"],
                        [(p["address"], p["by"], ", ".join(p["steps"]), p["analysis"]) for p in pairs])  # fmt: skip
    return lines


def _finder(finder: Mapping[str, Any]) -> list[str]:
    if not finder:
        return []
    scanned = finder.get("scanned") or {}
    fields = sum(p.get("fields", 0) for p in scanned.values())
    lines = [
        f"The reference finder searched {fields} fields of {', '.join(sorted(scanned)) or 'no plugin'} in "
        f"{finder.get('seconds')} s; {len(finder.get('independent_addresses') or [])} more addresses it found are "
        "outside the failure domain and not listed.",
        "",
    ]
    unscanned = finder.get("unscanned") or {}
    if unscanned:
        what = [
            f"{plugin} ({u['artifacts']}: {', '.join(u['examples'])}...)" for plugin, u in sorted(unscanned.items())
        ]
        lines += [f"Not searched (blobs, snapshots, archives, indexes): {'; '.join(what)}.", ""]
    return lines


def _independence(ind: Mapping[str, Any]) -> list[str]:
    counts = ind.get("counts") or {}
    summary = ", ".join(f"{counts.get(k, 0)} {k}" for k in STATUSES)
    lines = ["## Recovery independence", "", f"{summary}.", ""]
    blocking = counts.get("blocking")
    if blocking:
        lines += [f"**Blocking the restore itself: {blocking}.**", ""]
    findings = ind.get("findings") or []
    lines += _table(
        ["status", "dependency", "for", "found by", "carried by", "why", "fix"],
        [
            (
                STATUS_MARK.get(f["status"], f["status"])
                + ("" if f.get("needed", True) else " (not needed)")
                + (" — BLOCKS RESTORE" if f.get("blocks_restore") and f["status"] != "independent" else ""),
                f"`{f['address']}`",
                f["purpose"],
                ", ".join(f.get("found_by") or []),
                f.get("evidence"),
                f.get("detail") + (f" (waiver: {f['waiver']['reason']})" if f.get("waiver") else ""),
                f.get("hint"),
            )
            for f in findings
        ],
    )
    lines += _finder(ind.get("finder") or {})
    waivers = ind.get("waivers") or []
    if waivers:
        lines += ["### Waivers", ""]
        lines += _table(
            ["match", "reason", "step", "expires", "used"],
            [
                (
                    f"`{w['match']}`",
                    w["reason"],
                    w.get("step") or "all",
                    (w.get("expires") or "never") + (" (EXPIRED)" if w.get("expired") else ""),
                    w.get("used"),
                )
                for w in waivers
            ],
        )
    facts = (ind.get("domain") or {}).get("facts") or {}
    if facts:
        lines += ["### Failure domain (recorded at backup time)", ""]
        lines += _table(["part", "values"], [(k, ", ".join(v)) for k, v in sorted(facts.items())])
    return lines
