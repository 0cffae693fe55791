"""The README's main job on embedded defaults: a real etcd backed up into a local encrypted store and
restored into a new etcd, verified key by key. Usable from Python as ``run_demo(workdir)``."""

from __future__ import annotations

import dataclasses
import json
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.lab.components.etcd import EtcdServer
from drtool.lab.etcd_seed import seed, settings_of
from drtool.lab.lab import Lab
from drtool.plugin.contract import Check
from drtool.plugin.manager import get_plugin
from drtool.progress import NullProgress, Progress
from drtool.repo.check import check
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.store.local import LocalBackend

DEFAULT_WORKDIR = Path("~/.local/share/drtool/demo").expanduser()


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
    checks: list[Check] = dataclasses.field(default_factory=list)
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


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


def _fresh_workdir(workdir: Path) -> None:
    """Stop what an earlier demo left running and start from an empty folder."""
    for name in Lab.names(workdir / "labs"):
        Lab.load(name, workdir / "labs").down()
    for marker in (workdir / "restored").glob("*.drtool-restore.json"):
        server = json.loads(marker.read_text()).get("server")
        if server:
            EtcdServer.from_state(server).stop()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)


def run_demo(
    workdir: Path = DEFAULT_WORKDIR,
    keys: int = 20_000,
    keep: bool = False,
    echo: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> DemoReport:
    _fresh_workdir(workdir)
    report = DemoReport(workdir)
    timer = _Timer(report, echo)
    labs = workdir / "labs"
    source_lab = Lab("source", labs)
    restored: dict[str, Any] = {}
    try:
        with timer.step("start a source etcd (lab, loopback)") as d:
            source_lab.up(["etcd"])
            source = settings_of(source_lab["etcd"])  # type: ignore[arg-type]
            d.append(source["endpoints"])
        with timer.step(f"seed {keys} Kubernetes-shaped keys") as d:
            revision = seed(source, keys)
            d.append(f"revision {revision}")
        passphrase_file = workdir / "passphrase"
        passphrase = secrets.token_urlsafe(24)
        passphrase_file.touch(mode=0o600)
        passphrase_file.write_text(passphrase + "\n")
        with timer.step("create an encrypted store and a SQLite catalog") as d:
            repo = Repository.init(LocalBackend(workdir / "store"), passphrase=passphrase)
            catalog = Catalog(str(workdir / "catalog.db"))
            d.append(f"store {repo.backend.url}, id {repo.config.store_id}")
        etcd = get_plugin("etcd")
        with timer.step("back up etcd (streamed snapshot)") as d:
            manifest = run_backup(repo, [etcd], {"etcd": source}, catalog=catalog, progress=progress)
            report.backup_id = manifest.id
            report.facts["snapshot_bytes"] = manifest.size
            report.facts["stored_bytes"] = manifest.stats["bytes_stored"]
            d.append(f"{manifest.id}: {manifest.size} bytes read, {manifest.stats['bytes_stored']} stored")
        with timer.step("back up again (unchanged: deduplicated)") as d:
            again = run_backup(repo, [etcd], {"etcd": source}, catalog=catalog, progress=progress)
            report.facts["second_stored_bytes"] = again.stats["bytes_stored"]
            d.append(f"{again.stats['chunks_new']} new of {again.stats['chunks']} chunks")
        target = {
            "data_dir": str(workdir / "restored" / "data"),
            "name": "etcd-recovered",
            "start": True,
            "lab_dir": str(workdir / "restored"),
            "compare_with": source,
        }
        with timer.step("restore into a NEW etcd and verify against the source") as d:
            outcome = run_restore(repo, manifest.id, etcd, target, progress=progress or NullProgress())
            restored = dict(outcome.result.details)
            report.checks = outcome.checks
            d.append(outcome.result.summary)
        with timer.step("check the store (read and authenticate every chunk)") as d:
            store_report = check(repo, read_data=True)
            d.append(f"{store_report.chunks_read} chunks verified, {'ok' if store_report.ok else 'ERRORS'}")
        report.facts["catalog_backups"] = len(catalog.backups(repo.config.store_id))
    finally:
        if not keep:
            source_lab.down(purge=False)
            if restored.get("server"):
                EtcdServer.from_state(dict(restored["server"])).stop()
    return report
