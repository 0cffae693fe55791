"""The report's pictures as inline SVG: the rehearsal timeline, RPO/RTO against objectives, the plan's DAG.

Plain SVG text (no scripts, no external fonts or images) so the HTML report is one self-contained file that
a browser, a mail client or a ticket attachment shows as is. Colours are fixed per status (``COLOURS``) so
a person learns them once and the browser test can look for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from drtool.durations import format_duration
from drtool.plans.dag import waves
from drtool.plans.schema import Plan, Step

COLOURS = {
    "ok": "#2e7d32",
    "failed": "#c62828",
    "refused": "#ef6c00",
    "skipped": "#9e9e9e",
    "met": "#2e7d32",
    "missed": "#c62828",
    "inside": "#c62828",
    "unknown": "#f9a825",
    "waived": "#6a1b9a",
    "remediated": "#00838f",
    "independent": "#2e7d32",
}
INK, GRID, PAPER = "#212121", "#e0e0e0", "#ffffff"
MARK_COLOURS = ("#455a64", "#1565c0")  # the timeline's vertical lines: restore steps done, time to service
SMALL_SHARE = 0.05  # a measure under 5 % of its objective is marked and labelled, not only drawn
FONT = 'font-family="Helvetica, Arial, sans-serif" font-size="13"'


def _svg(width: int, height: int, body: list[str], label: str, element_id: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{element_id}" role="img" aria-label="{escape(label)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" {FONT}>'
        f'<rect width="{width}" height="{height}" fill="{PAPER}"/>' + "".join(body) + "</svg>"
    )


def _ticks(total: float, count: int = 6) -> list[float]:
    """Round tick values from 0 to at least ``total`` (1, 2 or 5 times a power of ten apart)."""
    raw = max(total, 1.0) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(total / step) + 2)]


def timeline_svg(
    steps: Sequence[Mapping[str, Any]],
    width: int = 1100,
    checks: Sequence[Mapping[str, Any]] = (),
    marks: Mapping[str, float | None] | None = None,
) -> str:
    """A Gantt chart: one row per step, a bar from ``started_s`` to ``finished_s`` coloured by ``status``;
    then one thinner row per plan check (``name``, ``ok``, ``started_s``, ``green_s``, ``finished_s``) with a
    tick where it turned green; and ``marks`` (label -> seconds, e.g. restore steps done, time to service)
    as vertical lines behind the bars."""
    label_w, row_h, top = 220, 30, 50
    marks = {k: v for k, v in (marks or {}).items() if v is not None}
    rows = [*steps, *checks]
    times = [float(r.get(k) or 0) for r in rows for k in ("started_s", "finished_s")] + list(marks.values())
    ticks = _ticks(max(times, default=0.0))
    span = ticks[-1] or 1.0
    plot_w = width - label_w - 20
    height = top + row_h * max(len(rows), 1) + 22

    def x_of(seconds: float) -> float:
        return label_w + plot_w * seconds / span

    body: list[str] = []
    for t in ticks:
        x = x_of(t)
        body.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 10}" stroke="{GRID}"/>')
        body.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" fill="{INK}">{format_duration(t)}</text>')
    label_ys = (top - 28, height - 1)  # the first mark is named above the axis, the next below the rows
    for i, (label, seconds) in enumerate(marks.items()):
        x, colour = x_of(seconds), MARK_COLOURS[i % len(MARK_COLOURS)]
        text = f"{escape(label)} {format_duration(seconds)}"
        body.append(
            f'<line class="mark" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 10}" stroke="{colour}" '
            f'stroke-width="2" stroke-dasharray="6 3"><title>{text}</title></line>'
        )
        end = x > width - 200  # near the right edge: the label ends at the line
        body.append(
            f'<text x="{x - 4 if end else x + 4:.1f}" y="{label_ys[i % 2]}" text-anchor="{"end" if end else "start"}" '
            f'fill="{colour}" font-weight="bold">{text}</text>'
        )
    for i, step in enumerate(steps):
        body += _bar(top + i * row_h, row_h, x_of, step, str(step.get("id")), str(step.get("status") or "skipped"))
    for i, check in enumerate(checks, start=len(steps)):
        status = "skipped" if (check.get("facts") or {}).get("skipped") else "ok" if check.get("ok") else "failed"
        y = top + i * row_h
        body += _bar(y, row_h, x_of, check, f"check {check.get('name')}", status, inset=4)
        if check.get("green_s") is not None:
            x = x_of(float(check["green_s"]))
            body.append(f'<line class="green" x1="{x:.1f}" y1="{y + 4}" x2="{x:.1f}" y2="{y + row_h - 4}" '
                        f'stroke="{INK}" stroke-width="2"/>')  # fmt: skip
    return _svg(width, height, body, "timeline of the rehearsal's steps and checks", "timeline")


def _bar(
    y: float,
    row_h: int,
    x_of: Callable[[float], float],
    row: Mapping[str, Any],
    label: str,
    status: str,
    inset: int = 0,
) -> list[str]:
    start = float(row.get("started_s") or 0)
    end = max(float(row.get("finished_s") or start), start)
    x, w = x_of(start), max(x_of(end) - x_of(start), 6.0)
    title = f"{label}: {status}, {format_duration(end - start)}"
    return [
        f'<text x="{x_of(0) - 10}" y="{y + 19}" text-anchor="end" fill="{INK}">{escape(label)}</text>',
        f'<rect class="bar status-{escape(status)}" x="{x:.1f}" y="{y + 5 + inset}" width="{w:.1f}" '
        f'height="{row_h - 10 - 2 * inset}" rx="3" fill="{COLOURS.get(status, COLOURS["skipped"])}">'
        f"<title>{escape(title)}</title></rect>",
    ]


def objectives_svg(rows: Sequence[Mapping[str, Any]], width: int = 1100) -> str:
    """Each measure as a share of its own objective (``name``, ``measured_s``, ``objective_s``, ``met``).

    RTO is minutes and RPO may be a day: on one time axis one of them would vanish, so the axis is the
    percentage of the objective, every objective is the black marker at 100 %, and the figures are written
    beside each bar. A measure without an objective is written, not drawn. A measure far below its objective
    (under ``SMALL_SHARE`` of it: a 44 s RTO against 1 h) would be a sliver, so it gets a labelled mark: a
    tick the height of the row at its true place and its share of the objective written beside it.
    """
    label_w, text_w, row_h, top = 220, 190, 44, 30
    ratios = [float(r["measured_s"]) / float(r["objective_s"]) for r in rows if _has_objective(r)]
    ticks = _ticks(max([1.0, *ratios]) * 100)
    span = ticks[-1] / 100
    plot_w = width - label_w - text_w
    height = top + row_h * max(len(rows), 1) + 10
    body: list[str] = []
    for t in ticks:
        x = label_w + plot_w * t / 100 / span
        body.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 6}" stroke="{GRID}"/>')
        body.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" fill="{INK}">{t:g} %</text>')
    for i, row in enumerate(rows):
        y = top + i * row_h
        name = escape(str(row["name"]))
        body.append(f'<text x="{label_w - 10}" y="{y + 25}" text-anchor="end" fill="{INK}">{name}</text>')
        measured = format_duration(float(row["measured_s"])) if row.get("measured_s") is not None else "-"
        if not _has_objective(row):
            body.append(f'<text x="{label_w}" y="{y + 25}" fill="{INK}">{measured} (no objective)</text>')
            continue
        state = "met" if row.get("met") else "missed"
        ratio = float(row["measured_s"]) / float(row["objective_s"])
        w = max(plot_w * ratio / span, 4.0)
        figures = f"{measured} of {format_duration(float(row['objective_s']))}"
        body.append(
            f'<rect class="bar objective-{state}" x="{label_w}" y="{y + 8}" width="{w:.1f}" height="{row_h - 16}" '
            f'rx="3" fill="{COLOURS[state]}"><title>{name}: {figures}</title></rect>'
        )
        x = label_w + plot_w / span  # the objective: 100 %
        body.append(
            f'<line x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + row_h - 2}" stroke="{INK}" stroke-width="3"/>'
        )
        if ratio < SMALL_SHARE:
            body += _small_mark(label_w + w, y, row_h, ratio, COLOURS[state])
        body.append(f'<text x="{label_w + plot_w + 10}" y="{y + 25}" fill="{INK}">{figures} ({state})</text>')
    return _svg(width, height, body, "RPO and RTO against their objectives", "objectives")


def _small_mark(x: float, y: float, row_h: int, ratio: float, colour: str) -> list[str]:
    """A measure too small to see as a bar: a tick at its end and its share of the objective beside it."""
    share = f"{ratio * 100:.2g} % of the objective"
    return [
        f'<line class="small-mark" x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + row_h - 2}" stroke="{colour}" '
        f'stroke-width="2"/>',
        f'<text class="small-mark" x="{x + 6:.1f}" y="{y + 25}" fill="{colour}" font-weight="bold">{share}</text>',
    ]


def _has_objective(row: Mapping[str, Any]) -> bool:
    return row.get("measured_s") is not None and bool(row.get("objective_s"))


def dag_svg(nodes: Sequence[Mapping[str, Any]], element_id: str = "dag") -> str:
    """Steps (``id``, ``uses``, ``needs``, optional ``status``) in columns by depth, arrows from needs."""
    # model_construct: a report's step ids are drawn as they are, not validated again
    steps = [
        Step.model_construct(id=str(n["id"]), uses=str(n.get("uses") or "?"), needs=list(n.get("needs") or []))
        for n in nodes
    ]
    columns = waves(steps)
    status = {str(n["id"]): str(n.get("status") or "") for n in nodes}
    uses = {s.id: s.uses for s in steps}
    box_w, box_h, gap_x, gap_y, pad = 190, 46, 70, 18, 16
    where: dict[str, tuple[float, float]] = {}
    for c, column in enumerate(columns):
        for r, step_id in enumerate(column):
            where[step_id] = (pad + c * (box_w + gap_x), pad + r * (box_h + gap_y))
    width = pad * 2 + max(len(columns), 1) * (box_w + gap_x) - gap_x
    height = pad * 2 + max((len(c) for c in columns), default=1) * (box_h + gap_y) - gap_y
    body = [
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker></defs>'
    ]
    for step in steps:
        x2, y2 = where[step.id]
        for need in step.needs:
            if need in where:
                x1, y1 = where[need]
                body.append(
                    f'<line x1="{x1 + box_w:.0f}" y1="{y1 + box_h / 2:.0f}" '
                    f'x2="{x2 - 2:.0f}" y2="{y2 + box_h / 2:.0f}" '
                    f'stroke="{INK}" stroke-width="1.5" marker-end="url(#arrow)"/>'
                )
    for step_id, (x, y) in where.items():
        fill = COLOURS.get(status[step_id], "#eceff1")
        ink = PAPER if status[step_id] in COLOURS else INK
        body.append(
            f'<rect class="node" x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="6" fill="{fill}" stroke="{INK}"/>'
            f'<text x="{x + box_w / 2}" y="{y + 19}" text-anchor="middle" font-weight="bold" fill="{ink}">'
            f"{escape(step_id)}</text>"
            f'<text x="{x + box_w / 2}" y="{y + 36}" text-anchor="middle" fill="{ink}">{escape(uses[step_id])}</text>'
        )
    return _svg(width, height, body, "the plan's steps and what each needs", element_id)


def render_dag_svg(plan: Plan) -> str:
    """The plan's DAG (``drtool plan show --html`` and the reports)."""
    return dag_svg([{"id": s.id, "uses": s.uses, "needs": s.needs} for s in plan.steps])
