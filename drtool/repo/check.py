"""`drtool check`: is every backup restorable? Finds missing, damaged and orphaned chunks, backups whose
stated times disagree with the store's clock (flagged: possibly forged, drtool/repo/times.py), and chain
links no restore uses (a reused seq, received out of order: drtool/repo/chains.py).

Without ``read_data`` it checks that every chunk a manifest names exists (names only, cheap: format 2
reads the index and lists the packs); with it, every referenced chunk is downloaded, authenticated,
decompressed and re-hashed. In format 2 that reads whole packs, one GET each, and also checks each pack's
own header against the index, so an index that lies about a pack is caught too.

Objects that do not authenticate or whose names do not parse (anyone who can write the store can put one
there: docs/threat-model.md) are listed by name in ``ignored``, with what opening the store passed over (key
slots, key records); every other command skips them with one warning.

Damage is reported where a user acts on it: a pack that is gone or damaged is named, and so is every
chunk of it a backup needs (a pack holds a few dozen chunks, and the chunks say which backups are hurt).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from drtool.errors import DrtoolError
from drtool.progress import NullProgress, Progress
from drtool.repo import layout
from drtool.repo.chains import Link, review_links
from drtool.repo.jobs import pending_parts
from drtool.repo.lock import list_locks
from drtool.repo.loose import LooseStore
from drtool.repo.pack import BlobEntry, parse_header
from drtool.repo.pack_index import Located, hex_ids
from drtool.repo.packed import PackedStore
from drtool.repo.repository import Repository
from drtool.repo.workers import DEFAULT_WORKERS


@dataclasses.dataclass
class CheckReport:
    backups: int = 0
    chunks_referenced: int = 0
    chunks_present: int = 0
    chunks_read: int = 0
    bad_manifests: dict[str, str] = dataclasses.field(default_factory=dict)
    # backups whose stated times disagree with the store's clock (drtool/repo/times.py): possibly forged;
    # and chain links no restore uses (a reused seq, received out of order: drtool/repo/chains.py)
    flagged: dict[str, str] = dataclasses.field(default_factory=dict)
    # folded fulls received after the point they hold: used for later points only (not an error)
    compacted: dict[str, str] = dataclasses.field(default_factory=dict)
    missing_chunks: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # chunk -> backups
    damaged_chunks: dict[str, str] = dataclasses.field(default_factory=dict)  # chunk -> error
    orphan_chunks: list[str] = dataclasses.field(default_factory=list)
    leftover_temp_files: list[str] = dataclasses.field(default_factory=list)
    # objects every command passes over (Repository.skip): name -> why; and what opening the store ignored
    ignored: dict[str, str] = dataclasses.field(default_factory=dict)
    store_warnings: list[str] = dataclasses.field(default_factory=list)
    # format 2
    packs_present: int = 0
    damaged_packs: dict[str, str] = dataclasses.field(default_factory=dict)  # pack -> error
    missing_packs: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # indexed, gone -> backups
    orphan_packs: list[str] = dataclasses.field(default_factory=list)  # uploaded, never indexed

    @property
    def ok(self) -> bool:
        return not (
            self.bad_manifests
            or self.flagged
            or self.missing_chunks
            or self.damaged_chunks
            or self.ignored
            or self.store_warnings
            or self.damaged_packs
        )

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, **dataclasses.asdict(self)}


def check(
    repo: Repository, *, read_data: bool = False, progress: Progress | None = None, workers: int = DEFAULT_WORKERS
) -> CheckReport:
    report = CheckReport()
    progress = progress or NullProgress()
    referenced: dict[str, list[str]] = {}
    links: list[Link] = []
    for backup_id in repo.backup_ids():
        report.backups += 1
        try:
            manifest = repo.get_manifest(backup_id)
        except DrtoolError as exc:
            report.bad_manifests[backup_id] = exc.message
            continue
        if manifest.flag:
            report.flagged[backup_id] = manifest.flag
        elif (link := Link.of(manifest)) is not None:
            links.append(link)
        for entry in manifest.artifacts:
            for chunk_id, _ in entry.chunks:
                referenced.setdefault(chunk_id, []).append(backup_id)
    doubtful, report.compacted = review_links(links, repo.max_skew)
    report.flagged.update(doubtful)
    leftovers = getattr(repo.backend, "leftover_temp_files", None)
    report.leftover_temp_files = leftovers() if leftovers else []

    list_locks(repo)  # read only: what does not authenticate is skipped, and so named in ``ignored``
    pending_parts(repo)
    if isinstance(repo.chunks, PackedStore):
        _check_packs(repo.chunks, referenced, report, read_data, progress, workers)
    else:
        present = set(repo.chunk_ids())
        report.chunks_referenced, report.chunks_present = len(referenced), len(present)
        report.missing_chunks = {c: sorted(set(b)) for c, b in referenced.items() if c not in present}
        report.orphan_chunks = sorted(present - referenced.keys())
        if read_data:
            _read_all(repo.chunks, sorted(referenced.keys() & present), report, progress, workers)
    bad = {layout.manifest(i) for i in report.bad_manifests}  # listed there already
    report.ignored = {name: why for name, why in sorted(repo.skipped.items()) if name not in bad}
    report.store_warnings = list(repo.warnings)
    return report


def _check_packs(
    store: PackedStore,
    referenced: dict[str, list[str]],
    report: CheckReport,
    read_data: bool,
    progress: Progress,
    workers: int,
) -> None:
    index = store.index(refresh=True)  # index objects that do not authenticate are skipped: named in ``ignored``
    listed = store.pack_ids()
    packs = dict(index.by_pack())
    indexed = {cid for pack_id, rows in packs.items() if pack_id in listed for cid in hex_ids(rows)}
    report.packs_present = len(listed)
    report.chunks_referenced, report.chunks_present = len(referenced), len(indexed)
    report.missing_chunks = {c: sorted(set(b)) for c, b in referenced.items() if c not in indexed}
    report.orphan_chunks = sorted(indexed - referenced.keys())
    report.orphan_packs = sorted(p for p, _, _ in store.adopt(sorted(listed - packs.keys())))  # header opens
    for pack_id in sorted(packs.keys() - listed):
        hurt = {b for cid in hex_ids(packs[pack_id]) for b in report.missing_chunks.get(cid, ())}
        if hurt:
            report.missing_packs[pack_id] = sorted(hurt)
    if read_data:
        task = progress.task("reading packs", len(packs))

        def read_pack(item: tuple[str, np.ndarray]) -> None:
            try:
                _verify_pack(store, item[0], item[1], report)
            finally:
                task.advance()

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(read_pack, [(p, rows) for p, rows in packs.items() if p in listed]))
        task.done()


def _verify_pack(store: PackedStore, pack_id: str, rows: np.ndarray, report: CheckReport) -> None:
    """Read a whole pack: its header must list what the index says, and every blob must open.

    A pack whose header does not open is damaged, and its blobs are still tried where the index places
    them: an overwritten pack then names every chunk it took down, while a pack with only a damaged header
    names none (restores read through the index and still work; only rebuilding the index would fail).
    """
    try:
        data = store.repo.backend.get(layout.pack(pack_id))
    except DrtoolError as exc:  # gone since it was listed, or unreadable
        report.damaged_packs[pack_id] = exc.message
        report.damaged_chunks.update((cid, f"pack {pack_id[:12]}: {exc.message}") for cid in hex_ids(rows))
        return
    header: dict[str, BlobEntry] | None = None
    try:
        header = {e.chunk_id: e for e in parse_header(store.repo.key, pack_id, data, len(data))}
    except DrtoolError as exc:
        report.damaged_packs[pack_id] = exc.message
    view = memoryview(data)
    for row, chunk_id in zip(rows, hex_ids(rows), strict=True):
        report.chunks_read += 1
        blob = BlobEntry(chunk_id, int(row["codec"]), int(row["offset"]), int(row["sealed"]), int(row["plain"]))
        if header is not None and header.get(chunk_id) != blob:
            report.damaged_chunks[chunk_id] = f"pack {pack_id[:12]}'s header disagrees with the index"
            continue
        if blob.offset + blob.sealed_length > len(data):
            report.damaged_chunks[chunk_id] = f"pack {pack_id[:12]} is shorter than its index says"
            continue
        try:
            store.open_blob(Located(pack_id, blob), view[blob.offset : blob.offset + blob.sealed_length])
        except DrtoolError as exc:
            report.damaged_chunks[chunk_id] = exc.message


def _read_all(store: LooseStore, chunk_ids: list[str], report: CheckReport, progress: Progress, workers: int) -> None:
    task = progress.task("reading chunks", len(chunk_ids))

    def read_one(chunk_id: str) -> tuple[str, str | None]:
        try:
            store.get(chunk_id)
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
