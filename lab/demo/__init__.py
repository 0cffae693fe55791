"""`drtool demo`, the README's first command (story.py), and what it does between its two rehearsals (followup.py)."""

from drtool_lab.demo.story import DEFAULT_WORKDIR, DemoReport, Phase, run_demo

__all__ = ["DEFAULT_WORKDIR", "DemoReport", "Phase", "run_demo"]
