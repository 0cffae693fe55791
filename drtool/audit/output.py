"""The scorecard for people and machines: a terminal table, JSON, a self-contained HTML page in the report
style, and one Prometheus gauge per item (1 pass, 0 unknown, -1 fail) so an alert can watch the checklist."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile
from rich.table import Table

from drtool.errors import UsageError
from drtool.report.render import env, write_atomic
from drtool.report.svg import COLOURS

from .grades import Scorecard, Status

STYLE: dict[Status, str] = {"pass": "green", "unknown": "yellow", "fail": "bold red"}
VALUE: dict[Status, int] = {"pass": 1, "unknown": 0, "fail": -1}


def table(card: Scorecard) -> Table:
    out = Table("item", "grade", "evidence", title=f"go-live audit: {card.verdict}", show_lines=True)
    for g in card.grades:
        out.add_row(f"{g.title}\n[dim]{g.item}[/]", f"[{STYLE[g.status]}]{g.status}[/]", "\n".join(g.evidence))
    return out


def to_html(card: Scorecard) -> str:
    return env.get_template("audit.html").render(card=card.to_dict(), colours=COLOURS)


def registry(card: Scorecard) -> CollectorRegistry:
    """``drtool_audit_item_status{item=...}`` per item and ``drtool_audit_timestamp_seconds``."""
    reg = CollectorRegistry()
    status = Gauge(
        "drtool_audit_item_status", "Go-live audit grade per item: 1 pass, 0 unknown, -1 fail", ("item",), registry=reg
    )
    for g in card.grades:
        status.labels(g.item).set(VALUE[g.status])
    Gauge("drtool_audit_timestamp_seconds", "When the audit ran", registry=reg).set_to_current_time()
    return reg


def write(card: Scorecard, out_dir: Path | None, metrics: Path | None = None) -> dict[str, Path]:
    """audit.json and audit.html into ``out_dir``, the metrics textfile to ``metrics``, each when asked;
    returns format -> path."""
    paths: dict[str, Path] = {}
    try:
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            paths["json"] = write_atomic(out_dir / "audit.json", json.dumps(card.to_dict(), indent=2) + "\n")
            paths["html"] = write_atomic(out_dir / "audit.html", to_html(card))
        if metrics is not None:
            write_to_textfile(str(metrics), registry(card))
            paths["metrics"] = metrics
    except OSError as exc:
        raise UsageError(f"cannot write the audit: {exc.strerror} ({exc.filename})", "choose another path") from None
    return paths
