"""A plugin from outside drtool, for tests/unit/test_contributed_checks.py: it contributes the plan check type
``file-says`` and nothing else. The test installs it as a distribution (its own ``drtool.plugins`` entry point on
``sys.path``), so drtool finds the check the way it finds any third party's, with no edit of drtool's core.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, PlatformCheck, Verdict
from drtool.plugin.contract import BasePlugin


class FileSays(CheckSettings):
    """A file the restore wrote holds some words."""

    type: Literal["file-says"]
    path: str
    words: str
    step: str | None = None  # the plan step that wrote it: skipped when that optional step did not run

    def summary(self) -> str:
        return f"{self.path} says {self.words!r}"


def file_says(check: FileSays, _ctx: CheckRun, watch: CheckWatch) -> Verdict:
    text = Path(check.path).read_text() if Path(check.path).is_file() else ""
    if check.words not in text:
        return Verdict(False, f"{check.path} does not say {check.words!r}")
    watch.green()
    return Verdict(True, f"{check.path} says {check.words!r}", {"bytes": len(text)})


def _nothing(*_args: Any) -> None:
    return None


class MarkerPlugin(BasePlugin):
    name = "marker"
    description = "contributes the `file-says` plan check (a test plugin)"
    backup = restore = verify = staticmethod(_nothing)

    def platform_checks(self) -> Sequence[PlatformCheck]:
        return (PlatformCheck("file-says", FileSays, file_says),)
