"""The README's main command: the whole story on embedded defaults, usable from Python as ``run_demo(workdir)``.

Start a lab, seed it through every installed plugin's LabSupport, back every one of those plugins up into a
local encrypted store, make the source unreachable (stopped, and guarded against at the socket level), then
rehearse ``restore-plans/full-cluster-rebuild.yaml`` into a fresh lab: RTO and RPO measured against the
plan's objectives, the independence analysis, the drill recorded, and the report written. A plugin added to
drtool with LabSupport joins every part of this without a change here.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import drtool
from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.errors import UsageError
from drtool.lab.lab import Lab
from drtool.plans.loader import load_plan
from drtool.progress import Progress
from drtool.rehearsal.rehearse import Rehearsal, RehearsalOptions, rehearse
from drtool.rehearsal.target import lab_plugins, seed_sources, stop_restored_servers
from drtool.repo.repository import Repository

DEFAULT_WORKDIR = Path("~/.local/share/drtool/demo").expanduser()
DEMO_PLAN = "full-cluster-rebuild.yaml"


@dataclasses.dataclass
class Step:
    name: str
    seconds: float
    detail: str


@dataclasses.dataclass
class DemoReport:
    workdir: Path
    backup_id: str = ""
    steps: list[Step] = dataclasses.field(default_factory=list)
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    rehearsal: Rehearsal | None = None

    @property
    def ok(self) -> bool:
        """The platform came back, verified. What it still depends on is the report's finding, not a failure
        of the demo: a newcomer sees both."""
        return self.rehearsal is not None and self.rehearsal.restored


class _Timer:
    def __init__(self, report: DemoReport, echo: Callable[[str], None]) -> None:
        self.report, self.echo = report, echo

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        detail: list[str] = []
        self.echo(f"… {name}")
        started = time.monotonic()
        yield detail
        self.report.steps.append(Step(name, time.monotonic() - started, "; ".join(detail)))


def shipped_plan(name: str) -> Path:
    """A plan from ``restore-plans/`` beside the package (the checkout the lab's fixtures come from too)."""
    path = Path(drtool.__file__).resolve().parents[1] / "restore-plans" / name
    if not path.is_file():
        raise UsageError(f"shipped plan {path} not found", "run the demo from a drtool checkout (pip install -e .)")
    return path


def _fresh_workdir(workdir: Path) -> None:
    """Stop what an earlier demo left running and start from an empty folder."""
    for name in Lab.names(workdir / "labs"):
        Lab.load(name, workdir / "labs").down()
    stop_restored_servers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)


def run_demo(
    workdir: Path = DEFAULT_WORKDIR,
    scale: int = 1,
    keep: bool = False,
    echo: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> DemoReport:
    plan_path = shipped_plan(DEMO_PLAN)
    _fresh_workdir(workdir)
    report = DemoReport(workdir)
    timer = _Timer(report, echo)
    labs = workdir / "labs"
    source_lab = Lab("source", labs)
    with _labs_root(labs):
        _steps(report, timer, plan_path, source_lab, workdir, scale, keep, echo, progress)
    return report


@contextmanager
def _labs_root(root: Path) -> Iterator[None]:
    """The demo's labs are this process's labs while it runs: a plugin that finds its lab by name finds it."""
    before = os.environ.get("DRTOOL_LAB_DIR")
    os.environ["DRTOOL_LAB_DIR"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DRTOOL_LAB_DIR", None)
        else:
            os.environ["DRTOOL_LAB_DIR"] = before


def _steps(
    report: DemoReport,
    timer: _Timer,
    plan_path: Path,
    source_lab: Lab,
    workdir: Path,
    scale: int,
    keep: bool,
    echo: Callable[[str], None],
    progress: Progress | None,
) -> None:
    labs = source_lab.root.parent
    try:
        plugins = lab_plugins()
        with timer.step(f"start a source lab and seed it through {len(plugins)} plugins") as d:
            sources = seed_sources(source_lab, plugins, scale, echo=echo, skip_unavailable=True)
            plugins = [p for p in plugins if p.name in sources]
            d.append(", ".join(f"{c.kind} {c.describe()}" for c in source_lab.components.values()))
        passphrase_file = workdir / "passphrase"
        passphrase_file.touch(mode=0o600)
        passphrase_file.write_text(secrets.token_urlsafe(24) + "\n")
        with timer.step("create an encrypted store and a SQLite catalog") as d:
            repo = Repository.init(LocalBackend(workdir / "store"), passphrase=passphrase_file.read_text().strip())
            catalog = Catalog(str(workdir / "catalog.db"))
            d.append(f"store {repo.backend.url}, id {repo.config.store_id}")
        with timer.step(f"back up {', '.join(sources)}") as d:
            manifest = run_backup(repo, plugins, sources, catalog=catalog, progress=progress)
            report.backup_id = manifest.id
            report.facts |= {"read_bytes": manifest.size, "stored_bytes": manifest.stats.get("bytes_stored", 0)}
            failed = [n for n, o in manifest.plugins.items() if o.status == "failed"]
            d.append(f"{manifest.id} {manifest.status}: {len(manifest.artifacts)} artifacts")
            if failed:
                d.append(f"failed: {', '.join(failed)}")
        with timer.step(f"rehearse {DEMO_PLAN} into a fresh lab, the source stopped and guarded") as d:
            options = RehearsalOptions(
                keep=keep,
                source_lab=source_lab,
                source_stays_down=True,
                out_dir=workdir / "reports",
                labs_root=labs,
            )
            report.rehearsal = rehearse(
                load_plan(plan_path), repo, options, catalog=catalog, echo=echo, progress=progress
            )
            run = report.rehearsal.report["run"]
            d.append(f"RTO {run['rto']['measured_s']:.1f}s, RPO {run['rpo']['measured_s']}s")
            d.append(f"isolation {run['isolation']['mode']}: {run['isolation']['covers']}")
    finally:
        if not keep:
            source_lab.down(purge=False)
