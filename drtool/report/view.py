"""What the Markdown and HTML reports show, derived once from the report dict both render.

The report dict (docs/reports.md) is what `drtool verify-independence` and `drtool rehearse` produce;
everything here is optional except ``kind``, so an independence-only report and a rehearsal share one path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.durations import format_duration
from drtool.plugin.contract import NO_CHECKS
from drtool.plugin.contract import VERDICT_TEXT as VERIFICATION_TEXT

VERDICT_TEXT = {
    "fail": "FAIL: something the restore needs lies inside the failure domain",
    "unknown": "UNKNOWN: nothing needed is inside the failure domain, but some dependencies could not be judged",
    "waived": "PASS WITH WAIVERS: what lies inside the failure domain is accepted by the plan's waivers",
    "pass": "PASS: every dependency is independent of the failure domain",
}


def seconds(value: Any) -> str:
    return format_duration(float(value)) if value is not None else "-"


def objective_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RTO, RPO and, where plugins differ, RPO per plugin: name, measured_s, objective_s, met."""
    rows = []
    rto, rpo = run.get("rto") or {}, run.get("rpo") or {}
    if rto:
        rows.append({"name": "RTO", **_measure(rto.get("measured_s"), rto.get("objective_s"), rto.get("met"))})
    if rpo:
        rows.append({"name": "RPO", **_measure(rpo.get("measured_s"), rpo.get("objective_s"), rpo.get("met"))})
        per_plugin = rpo.get("per_plugin") or {}
        if len(set(per_plugin.values())) > 1:
            for plugin, measured in sorted(per_plugin.items()):
                rows.append({"name": f"RPO {plugin}", **_measure(measured, rpo.get("objective_s"), None)})
    return rows


def _measure(measured: Any, objective: Any, met: Any) -> dict[str, Any]:
    if met is None and measured is not None and objective is not None:
        met = float(measured) <= float(objective)
    result = "no objective" if objective is None else ("met" if met else "missed")
    return {
        "measured_s": measured,
        "objective_s": objective,
        "met": bool(met),
        "result": result,
        "measured": seconds(measured),
        "objective": seconds(objective),
    }


def service_rows(run: Mapping[str, Any]) -> list[dict[str, str]]:
    """The recovery's milestones, in order: restore steps done, first workload running, in service, confirmed."""
    rto = run.get("rto") or {}
    named = (
        ("restore steps done", "restored_s", "the last step ended"),
        ("first queued workload running", "first_workload_s", "admitted by Kueue, its pod on a node"),
        ("time to service (RTO)", "service_s", "every check green"),
        ("checks confirmed", "confirmed_s", "the checks' watch windows closed"),
    )
    return [{"name": n, "at": seconds(rto[k]), "means": m} for n, k, m in named if rto.get(k) is not None]


def check_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The checks, each with ``green_at``: when a plan check first held, from the run's start."""
    return [{**c, "green_at": seconds(c["green_s"]) if c.get("green_s") is not None else ""}
            for c in report.get("checks") or []]  # fmt: skip


def training_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{**t, "wall_time_lost": seconds(t.get("wall_time_lost_s"))} for t in run.get("training") or []]


def step_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for step in run.get("steps") or []:
        started, finished = step.get("started_s"), step.get("finished_s")
        took = float(finished) - float(started) if started is not None and finished is not None else None
        rows.append(
            {**step, "duration": seconds(took), "refused": step.get("refused_connections") or [],
             "approval_note": approval_note(step.get("approval")), "verification_note": verification_note(step)}
        )  # fmt: skip
    return rows


def verification_note(step: Mapping[str, Any]) -> str:
    """What a step's verify said when it was not a plain pass or fail: it had nothing to check."""
    return VERIFICATION_TEXT[NO_CHECKS] if step.get("verification") == NO_CHECKS else ""


def approval_note(approval: Mapping[str, Any] | None) -> str:
    """How a gated step was let through (or not): a rehearsal says it approved by itself."""
    if not approval:
        return ""
    verdict = "approved" if approval["approved"] else "refused"
    if str(approval["how"]).startswith("automatic"):
        return f"{verdict} automatically: a rehearsal restores into a scratch target"
    return f"{verdict} by {approval['approver']} on {approval['host']} ({approval['how']})"


def left_out_rows(run: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(what, name, why) for each plugin and plan check the rehearsal's caller left out on purpose."""
    left_out = run.get("left_out") or {}
    rows = [("plugin", name, why) for name, why in sorted((left_out.get("plugins") or {}).items())]
    return rows + [("check", name, why) for name, why in sorted((left_out.get("checks") or {}).items())]


def dag_nodes(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The plan's steps with needs (and status, after a rehearsal), from whichever part of the report has them."""
    run_steps = (report.get("run") or {}).get("steps") or []
    if run_steps:
        return [
            {"id": s["id"], "uses": s.get("uses"), "needs": s.get("needs") or [], "status": s.get("status")}
            for s in run_steps
        ]
    steps = (report.get("independence") or {}).get("steps") or []
    return [{"id": s["id"], "uses": s.get("uses"), "needs": s.get("needs") or []} for s in steps]


def title(report: Mapping[str, Any]) -> str:
    kind = "Rehearsal" if report.get("kind") == "rehearsal" else "Recovery independence"
    plan = (report.get("plan") or {}).get("name") or "plan"
    return f"{kind} report: {plan}"


def verdicts(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(css state, sentence) for the headline: the independence verdict and, after a rehearsal, its outcome."""
    out = []
    independence = report.get("independence") or {}
    if independence:
        verdict = independence.get("verdict", "unknown")
        out.append((verdict, VERDICT_TEXT.get(verdict, verdict)))
    run = report.get("run")
    if run:
        failed = [s["id"] for s in run.get("steps") or [] if s.get("status") in ("failed", "refused")]
        bad_checks = [c for c in report.get("checks") or [] if not c.get("ok")]
        missed = [r["name"] for r in objective_rows(run) if r["result"] == "missed"]
        if failed or bad_checks:
            what = ", ".join(failed) or f"{len(bad_checks)} check(s)"
            out.append(("fail", f"REHEARSAL FAILED: {what}"))
        elif missed:
            out.append(("fail", f"REHEARSAL RESTORED, OBJECTIVES MISSED: {', '.join(missed)}"))
        elif unverified(run):
            said = f"restored and within its objectives; no checks ran in {', '.join(unverified(run))}"
            out.append(("unknown", f"REHEARSAL PASSED UNVERIFIED: {said}"))
        else:
            out.append(("pass", "REHEARSAL PASSED: restored, verified and within its objectives"))
    return out


def unverified(run: Mapping[str, Any]) -> list[str]:
    """Steps that ended ok whose verify had nothing to check (``verification``: none): restored, not verified."""
    return [s["id"] for s in run.get("steps") or [] if s.get("status") == "ok" and s.get("verification") == NO_CHECKS]
