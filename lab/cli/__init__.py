"""The commands the lab adds to `drtool`: ``lab``, ``demo`` and ``rehearse``, registered in the
``drtool.commands`` entry-point group (pyproject.toml), so a `drtool` without the lab (the container image)
has none of them."""

from __future__ import annotations

import typer
from drtool_lab.cli import demo_cmd, lab_cmds, rehearse_cmd


def register(app: typer.Typer) -> None:
    app.command()(demo_cmd.demo)
    app.add_typer(lab_cmds.app, name="lab")
    app.command()(rehearse_cmd.rehearse)
