"""`drtool lab doctor`: every lab component's programs, found or missing, and how each is obtained.

The lab builds its Go servers on first use and tests/run.sh installs the rest, so a missing program is not
an error here: the report says what will happen (a Go build of which module at which version, a PyPI
distribution, a Debian package) before a `drtool lab up` or `drtool demo` does it.
"""

from __future__ import annotations

import dataclasses
import subprocess

from drtool.environ import child_env
from drtool.errors import SourceError
from drtool.lab.components import KINDS
from drtool.lab.gorun import go_executable
from drtool.lab.provision import Provision


@dataclasses.dataclass(frozen=True)
class Finding:
    component: str  # the lab component kind (`drtool lab up --with ...`), or "toolchain"
    provision: Provision


def go_toolchain() -> Provision:
    """The Go toolchain that builds the lab's Go servers (``go version``)."""
    try:
        go = go_executable()
    except SourceError:
        return Provision("go", "go.dev", "Go 1.26 or newer (https://go.dev/dl)", "not installed", None)
    result = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False, env=child_env())
    out = result.stdout.strip()
    return Provision("go", "go.dev", "Go 1.26 or newer (https://go.dev/dl)", out or "unknown", go)


def doctor() -> list[Finding]:
    """One finding per program of every lab component kind, and the Go toolchain first."""
    findings = [Finding("toolchain", go_toolchain())]
    for kind in sorted(KINDS):
        findings += [Finding(kind, p) for p in KINDS[kind].provisions()]
    return findings
