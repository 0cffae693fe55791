"""An RPO or RTO far below its objective still shows in the HTML report: a labelled mark at its true place,
not a bar one pixel wide (a 44 s RTO against a 1 h objective)."""

from __future__ import annotations

import re

from drtool.report.svg import SMALL_SHARE, objectives_svg


def marks(svg: str) -> list[str]:
    return re.findall(r'<text class="small-mark"[^>]*>([^<]*)</text>', svg)


def test_a_measure_far_below_its_objective_gets_a_labelled_mark() -> None:
    svg = objectives_svg([
        {"name": "RTO", "measured_s": 44.0, "objective_s": 3600.0, "met": True},
        {"name": "RPO", "measured_s": 1800.0, "objective_s": 3600.0, "met": True},
    ])  # fmt: skip
    assert marks(svg) == ["1.2 % of the objective"]  # only the sliver; the half-objective bar shows itself
    tick = re.search(r'<line class="small-mark" x1="([\d.]+)"', svg)
    bar = re.search(r'<rect class="bar objective-met" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    assert tick and bar and float(tick.group(1)) == float(bar.group(1)) + float(bar.group(2))
    assert "44.0s of 1h00m (met)" in svg


def test_no_mark_at_or_above_the_threshold() -> None:
    at = {"name": "RTO", "measured_s": 3600.0 * SMALL_SHARE, "objective_s": 3600.0, "met": True}
    assert marks(objectives_svg([at])) == []
