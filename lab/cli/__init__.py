"""The commands the lab adds to `drtool`: ``lab`` and ``demo``, registered in the ``drtool.commands``
entry-point group (pyproject.toml), so a `drtool` without the lab (the container image) has neither. (`drtool
rehearse` is the product's: the lab adds its fresh-lab target provider, lab/targets.py.)"""

from __future__ import annotations

import typer
from drtool_lab.cli import demo_cmd, lab_cmds


def register(app: typer.Typer) -> None:
    app.command()(demo_cmd.demo)
    app.add_typer(lab_cmds.app, name="lab")
