"""The reports: JSON, Markdown and one self-contained HTML file, the last opened in a real headless Chromium.

The browser test reads the screenshot's pixels: the timeline's bars must be where the step times put
them (each bar starting where the previous one ended, widths in proportion to the durations, in the known
status colours) and the RPO/RTO bars and table below them. The same check run on a report without a
rehearsal must fail, which shows it looks at the picture and not merely at the page.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from drtool.plans.schema import Plan
from drtool.report import render_dag_svg, write_report
from drtool.report.svg import COLOURS, MARK_COLOURS

INK = (0x21, 0x21, 0x21)  # the objective marker (drtool.report.svg.INK)

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,2000",
]


def step(
    step_id: str, uses: str, needs: list[str], status: str, start: float | None, end: float | None
) -> dict[str, Any]:
    return {
        "id": step_id,
        "uses": uses,
        "needs": needs,
        "status": status,
        "started_s": start,
        "finished_s": end,
        "attempts": 1 if start is not None else 0,
        "summary": "skipped: plugin not in backup" if status == "skipped" else f"{uses} restored",
        "error": "connection to 10.96.0.1:443 refused" if status == "refused" else None,
        "refused_connections": ["10.96.0.1:443 (service_cidrs)"] if status == "refused" else [],
    }


INDEPENDENCE = {
    "verdict": "fail",
    "plan": "rebuild",
    "backup": {"id": "20261129T120000Z-abcdef", "created": "2026-11-29T12:00:05Z"},
    "generated": "2026-11-29T13:00:00Z",
    "counts": {"inside": 1, "unknown": 0, "waived": 1, "independent": 1, "blocking": 0},
    "domain": {"facts": {"service_cidrs": ["10.96.0.0/16"]}, "evidence": {"service_cidrs": "ServiceCIDR kubernetes"}},
    "steps": [
        {"id": "etcd", "uses": "etcd", "needs": [], "analysed": True, "note": ""},
        {"id": "cluster", "uses": "kubernetes", "needs": ["etcd"], "analysed": True, "note": ""},
    ],
    "findings": [
        {
            "kind": "reference",
            "address": "registry.infra.svc:5000",
            "purpose": "container image registry",
            "evidence": "deployments.apps ml/trainer image registry.infra.svc:5000/ml/trainer:1",
            "status": "inside",
            "detail": "registry.infra.svc:5000: a short in-cluster Service name, like *.svc in cluster_dns_suffixes",
            "hint": "copy the images to a registry outside the cluster",
            "steps": ["cluster"],
            "match": {"part": "cluster_dns_suffixes", "value": "*.svc", "how": "like", "evidence": ""},
            "waiver": None,
            "needed": True,
            "blocks_restore": False,
        },
        {
            "kind": "reference",
            "address": "10.96.100.100:5000",
            "purpose": "container image registry",
            "evidence": "deployments.apps ml/trainer image 10.96.100.100:5000/ml/sidecar:1",
            "status": "waived",
            "detail": "inside network 10.96.0.0/16",
            "hint": "accepted by a waiver",
            "steps": ["cluster"],
            "match": None,
            "waiver": {
                "match": "10.96.100.100:*",
                "reason": "rebuilt by CI <b>on restore</b>",
                "step": None,
                "expires": None,
            },
            "needed": True,
            "blocks_restore": False,
        },
    ],
    "waivers": [
        {
            "match": "10.96.100.100:*",
            "reason": "rebuilt by CI",
            "step": None,
            "expires": None,
            "expired": False,
            "used": 1,
        }
    ],
}

REHEARSAL = {
    "kind": "rehearsal",
    "plan": {"name": "rebuild", "path": "restore-plans/full-cluster-rebuild.yaml"},
    "backup": {"id": "20261129T120000Z-abcdef", "created": "2026-11-29T12:00:05Z"},
    "independence": INDEPENDENCE,
    "run": {
        "id": "run-7",
        "started": "2026-11-29T13:00:00Z",
        "finished": "2026-11-29T13:01:40Z",
        "target": "lab:rehearsal-7",
        "steps": [
            step("etcd", "etcd", [], "ok", 0, 20),
            step("cluster", "kubernetes", ["etcd"], "refused", 20, 70),
            step("quotas", "kueue", ["cluster"], "failed", 70, 100),
            step("models", "model-registry", ["etcd"], "skipped", None, None),
        ],
        "rto": {"measured_s": 100, "objective_s": 150, "met": True},
        "rpo": {
            "per_plugin": {"etcd": 120, "kubernetes": 120},
            "measured_s": 120,
            "objective_s": 90,
            "met": False,
            "failure_time": "2026-11-29T13:00:00Z",
        },
    },
    "checks": [{"step": "cluster", "name": "kubernetes: counts", "ok": False, "detail": "12 objects missing"}],
}


def timed(name: str, started: float, green: float | None, finished: float, **facts: Any) -> dict[str, Any]:
    detail = f"{name} green" if green is not None else f"{name} failed"
    ok = green is not None
    return {"step": "plan", "name": name, "ok": ok, "detail": detail, "started_s": started, "green_s": green,
            "finished_s": finished, "facts": facts}  # fmt: skip


# a rehearsal that came back: steps done at 100 s, every check green at 112 s (the probe job ran), the
# collector's and cert-manager's windows closed at 134 s
IN_SERVICE = copy.deepcopy(REHEARSAL)
IN_SERVICE["run"]["steps"] = [
    step("etcd", "etcd", [], "ok", 0, 20),
    step("cluster", "kubernetes", ["etcd"], "ok", 20, 70),
    step("quotas", "kueue", ["cluster"], "ok", 70, 100),
]
IN_SERVICE["run"]["rto"] = {"measured_s": 112, "objective_s": 150, "met": True, "restored_s": 100,
                            "service_s": 112, "first_workload_s": 112, "confirmed_s": 134}  # fmt: skip
IN_SERVICE["run"]["training"] = [
    {"check": "training", "folder": "mlp", "recovery_step": 20, "torn_steps": [30], "steps_lost_at_least": 10,
     "checkpoint_written_at": "2026-11-29T12:59:20Z", "wall_time_lost_s": 40.0, "resumed_from_step": 20},
]  # fmt: skip
IN_SERVICE["checks"] = [
    timed("admits", 100, 112, 112.5, running_s=12.0),
    timed("certificates", 100, 101, 134),
    timed("training", 100, 106, 106),
]


class Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(attrs[k] in a.get(k, "").split() for k in attrs)]


# --- JSON, Markdown, HTML structure -------------------------------------------------------------------


def test_three_formats_written_and_json_is_the_report(tmp_path: Path) -> None:
    paths = write_report(REHEARSAL, tmp_path / "out", "rehearsal-rebuild")
    assert {k: p.name for k, p in paths.items()} == {
        "json": "rehearsal-rebuild.json",
        "md": "rehearsal-rebuild.md",
        "html": "rehearsal-rebuild.html",
    }
    assert json.loads(paths["json"].read_text()) == REHEARSAL
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files left
    md = paths["md"].read_text()
    assert "REHEARSAL FAILED: cluster, quotas" in md
    assert "| RTO | 1m40s | 2m30s | met |" in md and "| RPO | 2m00s | 1m30s | missed |" in md
    assert "| cluster | kubernetes | ⛔ refused | 50.0s |" in md
    assert "10.96.0.1:443 (service_cidrs)" in md
    assert "`registry.infra.svc:5000`" in md and "rebuilt by CI" in md


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    html = write_report(REHEARSAL, tmp_path, "r")["html"].read_text()
    page = Elements(html)
    assert not page.find("script") and not page.find("link") and not page.find("img")
    assert "src=" not in html and "@import" not in html and "url(http" not in html
    assert "<b>on restore</b>" not in html and "&lt;b&gt;on restore&lt;/b&gt;" in html  # data is escaped
    bars = page.find("rect", **{"class": "bar"})
    assert [b["class"].split()[1] for b in bars[:4]] == [
        "status-ok",
        "status-refused",
        "status-failed",
        "status-skipped",
    ]
    assert [r["data-result"] for r in page.find("tr", **{"class": "objective"})] == ["met", "missed"]
    assert [f["data-status"] for f in page.find("tr", **{"class": "finding"})] == ["inside", "waived"]
    assert len(page.find("svg", id="timeline")) == len(page.find("svg", id="objectives")) == 1
    assert len(page.find("svg", id="dag")) == 1


def test_the_two_recovery_times_and_the_training_recovery_point(tmp_path: Path) -> None:
    paths = write_report(IN_SERVICE, tmp_path, "r")
    md = paths["md"].read_text()
    assert "| restore steps done | 1m40s | the last step ended |" in md
    assert "| time to service (RTO) | 1m52s | every check green |" in md
    assert "| first queued workload running | 1m52s |" in md and "| checks confirmed | 2m14s |" in md
    assert "| mlp | step 20 | 30 | at least 10 | 40.0s | 2026-11-29T12:59:20Z |" in md
    assert "| plan | admits | ✅ | 1m52s | admits green |" in md
    page = Elements(paths["html"].read_text())
    assert len(page.find("line", **{"class": "mark"})) == 2  # restore steps done, in service
    assert len(page.find("line", **{"class": "green"})) == 3  # where each check turned green
    assert len(page.find("table", id="service-table")) == len(page.find("table", id="training-table")) == 1
    text = "".join(page.text)
    assert "restore steps done 1m40s" in text and "in service 1m52s" in text


def test_a_step_that_checked_nothing_is_not_called_verified(tmp_path: Path) -> None:
    """A step whose verify had nothing to check (``verification``: none; an all() over no checks once read as
    a pass) does not fail the rehearsal, but the headline and its row say it was not verified."""
    unchecked = copy.deepcopy(IN_SERVICE)
    unchecked["run"]["steps"][2]["verification"] = "none"
    unchecked["run"]["rpo"] |= {"objective_s": 150, "met": True}
    paths = write_report(unchecked, tmp_path, "r")
    md = paths["md"].read_text()
    assert "REHEARSAL PASSED UNVERIFIED: restored and within its objectives; no checks ran in quotas" in md
    assert "| quotas | kueue | ✅ ok | 30.0s | 1 | kueue restored; not verified: no checks ran" in md
    page = Elements(paths["html"].read_text())
    assert len(page.find("span", **{"class": "verdict-unknown"})) == 1
    assert len(page.find("span", **{"class": "unverified"})) == 1
    del unchecked["run"]["steps"][2]["verification"]
    plain = write_report(unchecked, tmp_path / "plain", "r")["md"].read_text()
    assert "REHEARSAL PASSED: restored, verified and within its objectives" in plain and "no checks ran" not in plain


def test_dag_svg_of_a_plan() -> None:
    plan = Plan.model_validate(
        {
            "name": "p",
            "steps": [
                {"id": "etcd", "uses": "etcd"},
                {"id": "cluster", "uses": "kubernetes", "needs": ["etcd"]},
                {"id": "quotas", "uses": "kueue", "needs": ["cluster"]},
                {"id": "models", "uses": "model-registry", "needs": ["etcd"]},
            ],
        }
    )
    svg = render_dag_svg(plan)
    page = Elements(svg)
    assert len(page.find("rect", **{"class": "node"})) == 4
    assert len(page.find("line")) == 3  # one arrow per need
    assert "".join(page.text).count("kubernetes") == 1


# --- in a real browser --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Bar:
    colour: str
    y0: int
    y1: int
    x0: int
    x1: int

    @property
    def width(self) -> int:
        return self.x1 - self.x0


def screenshot(html: Path, tmp_path: Path) -> Image.Image:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed: `apt-get install chromium` (tests/run.sh does)")
    png = tmp_path / f"{html.stem}.png"
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--screenshot={png}"]
    proc = subprocess.run([chromium, *flags, html.as_uri()], capture_output=True, text=True, timeout=120)
    assert png.exists(), proc.stderr[-2000:]
    return Image.open(png).convert("RGB")


def bars(image: Image.Image, colours: dict[str, str], min_width: int) -> list[Bar]:
    """Solid horizontal runs of each colour at least ``min_width`` wide, merged over consecutive rows."""
    wanted = {tuple(int(hex_[i : i + 2], 16) for i in (1, 3, 5)): name for name, hex_ in colours.items()}
    width, height = image.size
    pixels = image.load()
    open_bars: dict[tuple[str, int, int], list[int]] = {}
    found: list[Bar] = []
    for y in range(height):
        runs: set[tuple[str, int, int]] = set()
        x = 0
        while x < width:
            name = wanted.get(pixels[x, y])
            if name is None:
                x += 1
                continue
            start = x
            while x < width and pixels[x, y] == pixels[start, y]:
                x += 1
            if x - start >= min_width:
                runs.add((name, start, x))
        for key in list(open_bars):
            if key not in runs:
                y0 = open_bars.pop(key)[0]
                found.append(Bar(key[0], y0, y - 1, key[1], key[2]))
        for key in runs:
            open_bars.setdefault(key, [y])
    return sorted(found, key=lambda b: (b.y0, b.x0))


def row_extent(image: Image.Image, y: int, colour: str) -> tuple[int, int]:
    """First and last x of ``colour`` in row ``y`` (a bar crossed by a marker still spans both pieces)."""
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    xs = [x for x in range(image.size[0]) if image.getpixel((x, y)) == rgb]
    return xs[0], xs[-1] + 1


def check_timeline_and_objectives(image: Image.Image) -> None:
    """The rehearsal's pictures, from pixels: raises AssertionError when one is missing or wrong."""
    colours = {k: COLOURS[k] for k in ("ok", "refused", "failed")}
    long_bars = [b for b in bars(image, colours, min_width=100) if b.y1 - b.y0 >= 8]
    refused = [b for b in long_bars if b.colour == "refused"]
    assert len(refused) == 1, f"no timeline bar for the refused step: {long_bars}"
    middle = refused[0]
    above = [b for b in long_bars if b.colour == "ok" and b.y1 < middle.y0]
    below = [b for b in long_bars if b.colour == "failed" and b.y0 > middle.y1]
    assert above and below, f"timeline rows missing: {long_bars}"
    first, last = above[-1], below[0]
    # each bar starts where the one before ended, widths in proportion to 20 s, 50 s, 30 s
    assert abs(first.x1 - middle.x0) <= 3 and abs(middle.x1 - last.x0) <= 3, (first, middle, last)
    unit = (last.x1 - first.x0) / 100
    for bar, seconds in ((first, 20), (middle, 50), (last, 30)):
        assert abs(bar.width - seconds * unit) <= 4, (bar, seconds, unit)
    # below the timeline: RTO (met, green) then RPO (missed, red), from the same left edge, 100 s and 120 s
    objectives = [b for b in long_bars if b.y0 > last.y1 and abs(b.x0 - first.x0) <= 3]
    assert [b.colour for b in objectives[:2]] == ["ok", "failed"], f"no RPO/RTO bars: {objectives}"
    rto, rpo = objectives[:2]
    # each drawn as a share of its objective, the objective the black marker at 100 %, the same for both
    rto_x, rpo_x = (row_extent(image, (b.y0 + b.y1) // 2, COLOURS[k]) for b, k in ((rto, "met"), (rpo, "missed")))
    markers = [
        next(x for x in range(b.x0, image.size[0]) if image.getpixel((x, (b.y0 + b.y1) // 2)) == INK)
        for b in (rto, rpo)
    ]
    assert abs(markers[0] - markers[1]) <= 2, markers
    hundred = markers[0] - rto.x0
    assert abs((rto_x[1] - rto_x[0]) - hundred * 100 / 150) <= 4, (rto_x, hundred)  # 1m40s of 2m30s
    assert abs((rpo_x[1] - rpo_x[0]) - hundred * 120 / 90) <= 4, (rpo_x, hundred)  # 2m00s of 1m30s
    # and the table under them: a "met" and a "missed" chip within the next rows
    chips = [b for b in bars(image, {"met": COLOURS["met"], "missed": COLOURS["missed"]}, 20) if b.y0 > rpo.y1]
    nearby = {b.colour for b in chips if b.y0 < rpo.y1 + 250}
    assert nearby == {"met", "missed"}, f"no objectives table under the bars: {chips[:6]}"


def mark_columns(image: Image.Image, colour: str, min_height: int = 40) -> list[int]:
    """x of each vertical line drawn in ``colour`` (dashed: counted over the whole column)."""
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    pixels = image.load()
    width, height = image.size
    return [x for x in range(width) if sum(pixels[x, y] == rgb for y in range(0, height, 2)) * 2 >= min_height]


def test_timeline_in_headless_chromium_marks_steps_done_and_time_to_service(tmp_path: Path) -> None:
    image = screenshot(write_report(IN_SERVICE, tmp_path / "report", "service")["html"], tmp_path)
    ok = [b for b in bars(image, {"ok": COLOURS["ok"]}, min_width=60) if b.y1 - b.y0 >= 8]
    first, last = ok[0], ok[2]  # the steps: etcd 0-20 s, quotas 70-100 s
    unit = (last.x1 - first.x0) / 100
    done, service = (mark_columns(image, colour) for colour in MARK_COLOURS)
    assert done and abs(sum(done) / len(done) - (first.x0 + 100 * unit)) <= 3, (done, first, last)
    assert service and abs(sum(service) / len(service) - (first.x0 + 112 * unit)) <= 3, (service, unit)
    # below the steps, one thinner row per check, from where the steps ended (100 s); each tick splits its bar
    checks = [b for b in bars(image, {"ok": COLOURS["ok"]}, min_width=30) if b.y1 - b.y0 >= 6 and last.y1 < b.y0]
    rows = [b for b in checks if b.x0 >= last.x1 - 3 and b.y0 < last.y1 + 120]
    assert len(rows) == 3, rows
    admits = rows[0]  # 100 s to its tick at 112 s: the probe's pod ran
    assert abs(admits.x0 - last.x1) <= 3 and abs(admits.x1 - (first.x0 + 112 * unit)) <= 4, (admits, unit)


def test_html_report_in_headless_chromium(tmp_path: Path) -> None:
    html = write_report(REHEARSAL, tmp_path / "report", "rehearsal")["html"]
    check_timeline_and_objectives(screenshot(html, tmp_path))
    # the same check on a report without a rehearsal (no timeline, no objectives) must fail
    only = copy.deepcopy({k: v for k, v in REHEARSAL.items() if k not in ("run", "checks")})
    only["kind"] = "independence"
    bare = write_report(only, tmp_path / "report", "independence")["html"]
    with pytest.raises(AssertionError, match="no timeline bar"):
        check_timeline_and_objectives(screenshot(bare, tmp_path))
