"""`drtool lab doctor`: every lab component's programs, found or missing, and how each is obtained.

The lab builds its Go servers on first use and tests/run.sh installs the rest, so a missing program is not
an error here: the report says what will happen (a Go build of which module at which version, a PyPI
distribution, a Debian package) before a `drtool lab up` or `drtool demo` does it. ``needed(kinds)`` is the
same knowledge for one set of components and what they start first: what `drtool demo` obtains
(lab/obtain.py).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterable

from drtool_lab.components import KINDS
from drtool_lab.gomods import go_built
from drtool_lab.gorun import go_executable

from drtool.environ import child_env
from drtool.errors import SourceError
from drtool.servers.provision import Provision, debian

TOOLCHAIN = "toolchain"
# not a lab server: what a rehearsal's network namespace is made with (lab/rehearsal/netns.py); without it a
# rehearsal falls back to the in-process guard and says so
ISOLATION = "rehearsal isolation"


@dataclasses.dataclass(frozen=True)
class Finding:
    component: str  # the lab component kind (`drtool lab up --with ...`), TOOLCHAIN or ISOLATION
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


def iproute2() -> Provision:
    def locate() -> str:
        found = shutil.which("ip")
        if not found:
            raise SourceError("ip is not installed")
        return found

    return debian("ip", "iproute2", locate)


def doctor() -> list[Finding]:
    """One finding per program of every lab component kind, the Go toolchain first."""
    return needed(sorted(KINDS))


def needed(kinds: Iterable[str]) -> list[Finding]:
    """The Go toolchain, the rehearsal's iproute2, then each program of ``kinds`` and of the kinds they start
    first (``with_requirements``)."""
    findings = [Finding(TOOLCHAIN, go_toolchain()), Finding(ISOLATION, iproute2())]
    for kind in with_requirements(kinds):
        programs = [*KINDS[kind].provisions(), *(go_built(name) for name in KINDS[kind].binaries)]
        findings += [Finding(kind, p) for p in programs]
    return findings


def with_requirements(kinds: Iterable[str]) -> list[str]:
    """``kinds`` and every kind a lab starts before them (kube-apiserver's etcd, mlflow's MinIO), sorted."""
    from drtool_lab.lab import Linked  # the Lab imports the components; the doctor only reads them

    seen: set[str] = set()
    todo = list(kinds)
    while todo:
        kind = todo.pop()
        if kind in seen:
            continue
        seen.add(kind)
        sample = KINDS[kind](name=kind, dir="")  # default settings: the requirements of a component as labs add it
        if isinstance(sample, Linked):
            todo += sample.requirements()
    return sorted(seen)
