"""Reports for people and machines: JSON, Markdown and one self-contained HTML file (docs/reports.md)."""

from drtool.report.render import write_report
from drtool.report.svg import render_dag_svg

__all__ = ["render_dag_svg", "write_report"]
