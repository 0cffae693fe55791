"""`drtool check`: is every backup restorable? Finds missing, damaged and orphaned chunks.

Without ``read_data`` it checks that every chunk a manifest names exists (names only, cheap); with it,
every referenced chunk is downloaded, authenticated, decompressed and re-hashed.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from drtool.config import DEFAULT_WORKERS
from drtool.errors import DrtoolError
from drtool.progress import NullProgress, Progress
from drtool.repo.repository import Repository


@dataclasses.dataclass
class CheckReport:
    backups: int = 0
    chunks_referenced: int = 0
    chunks_present: int = 0
    chunks_read: int = 0
    bad_manifests: dict[str, str] = dataclasses.field(default_factory=dict)
    missing_chunks: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # chunk -> backups
    damaged_chunks: dict[str, str] = dataclasses.field(default_factory=dict)  # chunk -> error
    orphan_chunks: list[str] = dataclasses.field(default_factory=list)
    leftover_temp_files: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.bad_manifests or self.missing_chunks or self.damaged_chunks)

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, **dataclasses.asdict(self)}


def check(
    repo: Repository, *, read_data: bool = False, progress: Progress | None = None, workers: int = DEFAULT_WORKERS
) -> CheckReport:
    report = CheckReport()
    progress = progress or NullProgress()
    referenced: dict[str, list[str]] = {}
    for backup_id in repo.backup_ids():
        report.backups += 1
        try:
            manifest = repo.get_manifest(backup_id)
        except DrtoolError as exc:
            report.bad_manifests[backup_id] = exc.message
            continue
        for entry in manifest.artifacts:
            for chunk_id, _ in entry.chunks:
                referenced.setdefault(chunk_id, []).append(backup_id)
    present = set(repo.chunk_ids())
    report.chunks_referenced, report.chunks_present = len(referenced), len(present)
    report.missing_chunks = {c: sorted(set(b)) for c, b in referenced.items() if c not in present}
    report.orphan_chunks = sorted(present - referenced.keys())
    leftovers = getattr(repo.backend, "leftover_temp_files", None)
    report.leftover_temp_files = leftovers() if leftovers else []
    if read_data:
        _read_all(repo, sorted(referenced.keys() & present), report, progress, workers)
    return report


def _read_all(repo: Repository, chunk_ids: list[str], report: CheckReport, progress: Progress, workers: int) -> None:
    task = progress.task("reading chunks", len(chunk_ids))

    def read_one(chunk_id: str) -> tuple[str, str | None]:
        try:
            repo.get_chunk(chunk_id)
            return chunk_id, None
        except DrtoolError as exc:
            return chunk_id, exc.message
        finally:
            task.advance()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for chunk_id, error in pool.map(read_one, chunk_ids):
            report.chunks_read += 1
            if error:
                report.damaged_chunks[chunk_id] = error
    task.done()
