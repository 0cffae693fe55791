"""The README's main command: the whole story on embedded defaults, usable from Python as ``run_demo(workdir)``.

1. Get what the lab runs (lab/obtain.py): Debian packages as root on Debian, Go builds; a plugin
   whose lab still cannot run here is left out, with the reason.
2. Start a source lab and seed it through every plugin's LabSupport; back every seeded plugin up into a
   local encrypted store.
3. Make the source unreachable (stopped, and guarded against) and rehearse
   ``restore-plans/full-cluster-rebuild.yaml`` into a fresh lab: RTO and RPO against the plan's objectives,
   the independence analysis, the drill recorded, the report written. Steps of left-out plugins are skipped
   with the reason, never failed.
4. Close what the first rehearsal found inside the failure domain (followup.py: the DNS cut-over values,
   waivers for what no step can rewrite) and rehearse the same backup again with that plan.
5. Write one page with both rehearsals side by side (drtool/report/loop.py), and the drill matrix: every
   failure scenario against its latest drill in the demo's catalog (the rehearsals drilled the whole
   cluster lost; `drtool drill` drills the others).

A plugin added to drtool with LabSupport joins every part of this without a change here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from drtool_lab.demo.followup import FollowUp, follow_up, inside
from drtool_lab.doctor import with_requirements
from drtool_lab.lab import Lab
from drtool_lab.obtain import obtain
from drtool_lab.support import lab_support
from drtool_lab.targets import LabSource, lab_plugins, seed_sources, start_together

import drtool
from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.errors import SourceError, UsageError
from drtool.plans.loader import ENV_PREFIX, load_plan
from drtool.plugin.contract import Plugin
from drtool.progress import NullProgress, Stages
from drtool.rehearsal.rehearse import Rehearsal, RehearsalOptions, rehearse
from drtool.rehearsal.target import stop_restored_servers
from drtool.repo.repository import Repository
from drtool.report.loop import write_loop_report

DEFAULT_WORKDIR = Path("~/.local/share/drtool/demo").expanduser()
DEMO_PLAN = "full-cluster-rebuild.yaml"
# The plan's no-reissue and gc-stable checks watch a minute after green in a real rehearsal; the demo shows them
# watching 15 s (in a fresh lab cert-manager's re-issue and the collector's deletions come within seconds), 90 s
# less of the demo spent waiting. ``DRTOOL_VAR_CHECK_WINDOW`` still sets it, as for any plan.
DEMO_VALUES = {"CHECK_WINDOW": "15s"}
Echo = Callable[[str], None]


@dataclasses.dataclass
class Phase:
    name: str
    seconds: float
    result: str  # one line: what came of it


@dataclasses.dataclass
class DemoReport:
    workdir: Path
    backup_id: str = ""
    phases: list[Phase] = dataclasses.field(default_factory=list)
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)  # plugin -> why it is not in the demo
    rehearsals: list[Rehearsal] = dataclasses.field(default_factory=list)  # the first, then the one after the fix
    followup: FollowUp | None = None
    report_path: Path | None = None  # the page with both rehearsals side by side
    matrix: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # drtool.drills.matrix rows

    @property
    def final(self) -> Rehearsal | None:
        return self.rehearsals[-1] if self.rehearsals else None

    @property
    def ok(self) -> bool:
        """The last rehearsal restored and verified everything, and nothing it needs lies in the failed cluster."""
        return self.final is not None and self.final.ok


def shipped_plan(name: str) -> Path:
    """A plan from ``restore-plans/`` beside the package (a checkout installed with ``pip install -e .``)."""
    path = Path(drtool.__file__).resolve().parents[1] / "restore-plans" / name
    if not path.is_file():
        raise UsageError(f"shipped plan {path} not found", "run the demo from a drtool checkout (pip install -e .)")
    return path


def run_demo(
    workdir: Path = DEFAULT_WORKDIR,
    scale: int = 1,
    keep: bool = False,
    *,
    install: bool = True,
    plugins: Sequence[str] | None = None,
    echo: Echo = print,
    progress: Stages | None = None,
) -> DemoReport:
    """The story above in ``workdir`` (emptied first). ``install=False`` refuses to install Debian packages;
    ``plugins`` names the plugins to show (default: every one with LabSupport; the rest are left out)."""
    plan_path = shipped_plan(DEMO_PLAN)
    chosen = lab_plugins(plugins)
    story = _Story(DemoReport(workdir), echo, progress or NullProgress())
    story.report.left_out = {p.name: "not chosen (drtool demo -p)" for p in lab_plugins() if p not in chosen}
    with story.phase("get what the lab runs") as out:  # before anything is touched: --no-install may refuse
        runnable = story.obtain(chosen, install)
        out.append(f"{len(runnable)} of {len(chosen)} plugins can run here" + story.left_out_note())
    if not runnable:
        raise SourceError("none of the chosen plugins can run here", "`drtool lab doctor` says what is missing")
    _fresh_workdir(workdir)
    source_lab = Lab("source", workdir / "labs")
    with _labs_root(workdir / "labs"):
        try:
            story.tell(plan_path, runnable, source_lab, scale, keep)
            story.report.matrix = drill_matrix(Catalog(str(workdir / "catalog.db")))
        finally:
            if not keep:
                source_lab.down(purge=False)
    return story.report


def drill_matrix(catalog: Catalog) -> list[dict[str, Any]]:
    """Every failure scenario against its latest drill in ``catalog`` (docs/drills.md)."""
    return matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())


def _fresh_workdir(workdir: Path) -> None:
    """Stop what an earlier demo left running and start from an empty folder."""
    for name in Lab.names(workdir / "labs"):
        Lab.load(name, workdir / "labs").down()
    stop_restored_servers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)


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


class _Story:
    """The phases of one demo, each timed into ``report.phases`` and shown as a stage of ``progress``."""

    def __init__(self, report: DemoReport, echo: Echo, progress: Stages) -> None:
        self.report, self.echo, self.progress = report, echo, progress

    @contextmanager
    def phase(self, name: str) -> Iterator[list[str]]:
        """A timed phase: a line when it starts, its result (what the body appends) in the summary table."""
        result: list[str] = []
        self.echo(f"… {name}")
        started = time.monotonic()
        with self.progress.stage(name):
            yield result
        self.report.phases.append(Phase(name, time.monotonic() - started, "; ".join(result)))

    def tell(self, plan_path: Path, plugins: list[Plugin], source: Lab, scale: int, keep: bool) -> None:
        workdir = self.report.workdir
        with self.phase(f"seed a source lab ({len(plugins)} plugins)") as out:
            start_together(source, (kind for p in plugins for kind in lab_support(p.name).kinds))  # type: ignore[union-attr]
            sources = seed_sources(source, plugins, scale, echo=self.echo, left_out=self.report.left_out)
            plugins = [p for p in plugins if p.name in sources]
            if not plugins:
                raise SourceError("no plugin's lab could be seeded here", "the lines above say why, plugin by plugin")
            out.append(", ".join(sorted(c.kind for c in source.components.values())))
        repo, catalog = self.store(workdir)
        with self.phase(f"back up ({len(plugins)} plugins, encrypted)") as out:
            manifest = run_backup(repo, plugins, sources, catalog=catalog, progress=self.progress)
            self.report.backup_id = manifest.id
            self.report.facts |= {"read_bytes": manifest.size, "stored_bytes": manifest.stats.get("bytes_stored", 0)}
            failed = [n for n, o in manifest.plugins.items() if o.status == "failed"]
            out.append(f"{manifest.id} {manifest.status}: {len(manifest.artifacts)} artifacts")
            if failed:
                out.append(f"failed: {', '.join(failed)}")
        options = RehearsalOptions(
            source=LabSource(source),
            source_stays_down=True,
            out_dir=workdir / "reports",
            labs_root=workdir / "labs",
            left_out=dict(self.report.left_out),
        )
        first = self.rehearse("rehearsal 1", plan_path, {}, options, repo, catalog)
        gaps = inside(first.report.get("independence") or {})
        if not first.restored or not gaps:
            self.write_loop()
            return
        with self.phase("close the gaps it found") as out:
            today = dt.datetime.now(dt.UTC).date()
            fix = follow_up(first.report["independence"], plan_path, workdir / "plan-followup", today)
            self.report.followup = fix
            for line in fix.lines():
                self.echo(f"  {line}")
            out.append(f"{len(fix.cutover)} DNS cut-over(s), {len(fix.waivers)} waiver(s): {fix.plan_path.name}")
        options.keep = keep
        self.rehearse("rehearsal 2, with the fix", fix.plan_path, fix.values, options, repo, catalog)
        self.write_loop()

    def obtain(self, chosen: list[Plugin], install: bool) -> list[Plugin]:
        """The chosen plugins whose lab can run here once what it needs is installed and built."""
        kinds_of = {p.name: with_requirements(lab_support(p.name).kinds) for p in chosen}  # type: ignore[union-attr]
        needed_by: dict[str, list[str]] = {}
        for name, kinds in kinds_of.items():
            for kind in kinds:
                needed_by.setdefault(kind, []).append(name)
        missing = obtain(list(needed_by), install=install, needed_by=needed_by, echo=self.echo)
        for name, kinds in kinds_of.items():
            why = next((f"{kind}: {missing[kind]}" for kind in kinds if kind in missing), None)
            if why:
                self.report.left_out[name] = why
                self.echo(f"left out {name}: {why}")
        return [p for p in chosen if p.name not in self.report.left_out]

    def left_out_note(self) -> str:
        return f"; left out: {', '.join(sorted(self.report.left_out))}" if self.report.left_out else ""

    def store(self, workdir: Path) -> tuple[Repository, Catalog]:
        """A local encrypted store (its passphrase in a 0600 file, never printed) and a SQLite catalog."""
        passphrase_file = workdir / "passphrase"
        passphrase_file.touch(mode=0o600)
        passphrase_file.write_text(secrets.token_urlsafe(24) + "\n")
        repo = Repository.init(LocalBackend(workdir / "store"), passphrase=passphrase_file.read_text().strip())
        return repo, Catalog(str(workdir / "catalog.db"))

    def rehearse(
        self,
        name: str,
        plan_path: Path,
        values: dict[str, str],
        options: RehearsalOptions,
        repo: Repository,
        catalog: Catalog,
    ) -> Rehearsal:
        self.echo(f"{name}: {plan_path} into a fresh lab, the source stopped and guarded")
        with self.phase(name) as out:
            demo_values = {k: v for k, v in DEMO_VALUES.items() if ENV_PREFIX + k not in os.environ}
            loaded = load_plan(plan_path, values=demo_values | values)
            result = rehearse(loaded, repo, options, catalog=catalog, echo=self.echo, progress=self.progress)
            self.report.rehearsals.append(result)
            run, independence = result.report["run"], result.report.get("independence") or {}
            counts = independence.get("counts") or {}
            out.append(f"restore {'verified' if result.restored else 'FAILED'}, RTO {run['rto']['measured_s']:.0f}s")
            out.append(
                f"independence {independence.get('verdict', '-')}: {counts.get('inside', 0)} inside, "
                f"{counts.get('remediated', 0)} remediated, {counts.get('waived', 0)} waived, "
                f"{counts.get('unknown', 0)} unknown"
            )
        return result

    def write_loop(self) -> None:
        reports = [(r.report, r.paths) for r in self.report.rehearsals]
        followup = self.report.followup.to_dict() if self.report.followup else None
        summary = {"left_out": self.report.left_out, "backup": self.report.backup_id, "ok": self.report.ok}
        self.report.report_path = write_loop_report(reports, followup, summary, self.report.workdir / "reports")
