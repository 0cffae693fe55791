"""The Markdown report: short enough for a pull-request comment or a ticket, complete enough to act on.

Most of what it prints comes from backup data and plans (addresses, purposes, evidence, step errors), which
a forged backup or a careless plan controls. So every such value is rendered inert: ``_text`` escapes what
would make a link, an image, a code span, raw HTML, an autolink or a mention, and ``_code`` puts a value in
a code span no backtick inside it can close. Only the report's own words are markup.
"""

from __future__ import annotations

import re
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


class _Markup(str):
    """Markdown this module wrote itself (a code span around data): a table cell keeps it as it is."""


_ESCAPE = re.compile(r"[\\`\[\]#@!*]")  # backslash, code spans, links/images, issue refs, mentions, emphasis
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<=www)(\.)")  # GFM autolinks: scheme://, www.


def _text(value: Any) -> str:
    """``value`` as inert Markdown text: shown as written, never a link, image, code span or HTML."""
    text = " ".join(str(value if value is not None else "").splitlines())
    text = _ESCAPE.sub(lambda m: "\\" + m.group(0), text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AUTOLINK.sub(lambda m: "\\" + m.group(0), text)


def _code(value: Any) -> _Markup:
    """``value`` in a code span fenced by more backticks than it contains in a row (CommonMark), so nothing in
    it is markup and nothing in it ends the span."""
    text = " ".join(str(value if value is not None else "").splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return _Markup(f"{fence}{pad}{text}{pad}{fence}")


def _cell(value: Any) -> str:
    """A table cell: data escaped, the module's own markup kept; ``|`` escaped in both (GFM reads ``\\|`` inside
    code spans in tables as a literal pipe)."""
    rendered = value if isinstance(value, _Markup) else _text(value)
    return rendered.replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def to_markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# {_text(view.title(report))}", ""]
    for _, sentence in view.verdicts(report):
        lines.append(f"**{_text(sentence)}**  ")
    plan, backup = report.get("plan") or {}, report.get("backup") or {}
    lines += [
        "",
        f"Plan {_code(plan.get('path') or plan.get('name'))}, backup {_code(backup.get('id'))} "
        f"({_text(backup.get('created'))})",
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
    lines += [
        f"Run {_code(run.get('id'))} into {_code(run.get('target'))}, "
        f"{_text(run.get('started'))} to {_text(run.get('finished'))}",
        "",
    ]
    service = view.service_rows(run)
    if service:
        rows = [(r["name"], r["at"], r["means"]) for r in service]
        lines += _table(["from the source down to", "at", "meaning"], rows)
    training = view.training_rows(run)
    if training:
        lines += ["## Training recovery point", ""]
        lines += _table(
            ["run", "resumed from", "torn, not used", "steps lost", "training time lost", "checkpoint written"],
            [(t["folder"], f"step {t['recovery_step']}", ", ".join(map(str, t["torn_steps"])) or "none",
              f"at least {t['steps_lost_at_least']}", t["wall_time_lost"], t["checkpoint_written_at"])
             for t in training],
        )  # fmt: skip
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
                "; ".join(
                    filter(None, (s.get("error") or s.get("summary"), s["approval_note"], s["verification_note"]))
                ),
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
        rows = [
            (c["step"], c["name"], "✅" if c["ok"] else "❌", c["green_at"], c["detail"])
            for c in view.check_rows(report)
        ]
        lines += _table(["step", "check", "result", "green at", "detail"], rows)
    return lines


def _isolation(run: Mapping[str, Any]) -> list[str]:
    isolation = run.get("isolation")
    if not isolation:
        return []
    lines = [
        "### Isolation",
        "",
        f"**{_text(isolation['mode'])}** ({_text(isolation.get('why'))}): covers {_text(isolation['covers'])}.",
        "",
    ]
    if isolation.get("relayed"):
        lines += [f"Relayed into the namespace: {_text(', '.join(isolation['relayed']))}.", ""]
    if isolation.get("blocked"):
        lines += [f"Blocked outside the failure domain: {_text(', '.join(isolation['blocked']))}.", ""]
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
        f"The reference finder searched {fields} fields of {_text(', '.join(sorted(scanned)) or 'no plugin')} in "
        f"{_text(finder.get('seconds'))} s; {len(finder.get('independent_addresses') or [])} more addresses it "
        "found are outside the failure domain and not listed.",
        "",
    ]
    unscanned = finder.get("unscanned") or {}
    if unscanned:
        what = [
            f"{plugin} ({u['artifacts']}: {', '.join(u['examples'])}...)" for plugin, u in sorted(unscanned.items())
        ]
        lines += [f"Not searched (blobs, snapshots, archives, indexes): {_text('; '.join(what))}.", ""]
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
                _code(f["address"]),
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
                    _code(w["match"]),
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
