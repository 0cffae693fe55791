"""`drtool prune`: forget backups the retention policy no longer keeps, then delete chunks nothing names.

Safety argument (restic's design, docs/retention.md):
- prune holds the store's exclusive lock, so no backup runs: every running backup holds a shared lock, and
  a backup whose lock was removed as stale aborts before publishing (drtool/repo/lock.py);
- the mark phase reads every manifest that survives; if any manifest cannot be read, nothing is swept
  (a chunk it names would look like garbage). A manifest that does not authenticate under the store's keys
  is not a backup (anyone who can write the store can put one there, and under Object Lock nobody can remove
  it): it is skipped with a warning and the sweep goes on;
- manifests are deleted before chunks, so a crash leaves orphan chunks (cleaned by the next prune), never a
  manifest naming a deleted chunk;
- the lock is re-checked before the sweep and between batches: a prune that lost it stops deleting;
- chunks named by the parts of a sharded backup not yet committed (docs/scaling.md) are live too.
Objects under S3 Object Lock retention or legal hold are skipped and reported, never errors.

The sweep depends on the format: loose chunks nothing names are deleted (format 1); in format 2 dead packs
are deleted and mostly-dead ones repacked (drtool/repo/repack.py). The mark set is built one manifest at a
time: each manifest's ids go to a file of their own as it is read (which manifests survive is known only
once all are read), then the survivors' into 256 parts by chunk id on local disk (drtool/repo/spill.py),
which the format-2 sweep joins with the index one part at a time: memory does not grow with the store.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from drtool.backends.backend import Backend
from drtool.errors import DrtoolError, Unauthentic
from drtool.repo import layout, repack
from drtool.repo.chunk_lists import ChunkListCut
from drtool.repo.jobs import pending_parts
from drtool.repo.lock import DEFAULT_TTL, acquire, remove_stale_locks
from drtool.repo.manifest import Manifest
from drtool.repo.pack_index import hex_ids, unique_ids
from drtool.repo.packed import PackedStore
from drtool.repo.repository import Repository
from drtool.repo.spill import Spill, unique_parts
from drtool.repo.workers import DEFAULT_WORKERS
from drtool.repo.writer import DEFAULT_LOCK_WAIT
from drtool.retention import BackupRef, ChainPosition, Decision, RetentionPolicy, decide

_BATCH = 1000  # chunks deleted between two lock checks


@dataclasses.dataclass
class PruneReport:
    dry_run: bool
    decisions: dict[str, list[Decision]] = dataclasses.field(default_factory=dict)  # set name -> decisions
    forgotten: list[str] = dataclasses.field(default_factory=list)
    unreadable_manifests: dict[str, str] = dataclasses.field(default_factory=dict)
    flagged: dict[str, str] = dataclasses.field(default_factory=dict)  # kept, counted by no rule: why
    chunks_present: int = 0
    chunks_referenced: int = 0
    chunks_deleted: int = 0  # or, in a dry run, that would be deleted
    packs_present: int = 0  # format 2
    packs_deleted: int = 0
    packs_repacked: int = 0
    packs_written: int = 0
    locked_objects: dict[str, str] = dataclasses.field(default_factory=dict)  # object name -> retention
    stale_locks_removed: list[str] = dataclasses.field(default_factory=list)
    ignored: dict[str, str] = dataclasses.field(default_factory=dict)  # objects passed over (Repository.skip)

    def to_json(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["decisions"] = {
            name: [{"id": d.backup.id, "keep": d.keep, "reasons": list(d.reasons)} for d in decisions]
            for name, decisions in self.decisions.items()
        }
        return data


def backup_ref(manifest: Manifest) -> BackupRef:
    """What retention needs of a backup: its finish time (what the store's clock vouches for), and its flag."""
    finished = dt.datetime.fromisoformat(manifest.finished)
    chain = manifest.chain
    link = None
    if chain is not None:
        link = ChainPosition(manifest.kind, chain.base, chain.seq, dt.datetime.fromisoformat(chain.last_time))
    complete = manifest.status == "complete"
    tags = tuple(manifest.tags)
    return BackupRef(id=manifest.id, time=finished, complete=complete, tags=tags, link=link, flag=manifest.flag)


def plan(
    manifests: Iterable[Manifest],
    policies: Mapping[str, RetentionPolicy],
    now: dt.datetime,
    only_set: str | None = None,
) -> dict[str, list[Decision]]:
    """Decisions per backup set; a set without a policy (or not selected by ``only_set``) keeps everything."""
    by_set: dict[str, list[BackupRef]] = {}
    for m in manifests:
        by_set.setdefault(m.backup_set or "", []).append(backup_ref(m))
    out = {}
    for name, refs in sorted(by_set.items()):
        policy = policies.get(name) if only_set in (None, name) else None
        out[name] = decide(refs, policy or RetentionPolicy(), now)
    return out


def prune(
    repo: Repository,
    policies: Mapping[str, RetentionPolicy],
    *,
    only_set: str | None = None,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    lock_wait: float = DEFAULT_LOCK_WAIT,
    lock_ttl: float = DEFAULT_TTL,
    workers: int = DEFAULT_WORKERS,
) -> PruneReport:
    """Forget what the policies no longer keep, then garbage-collect chunks. ``dry_run`` changes nothing."""
    now = now or dt.datetime.now(dt.UTC)
    report = PruneReport(dry_run=dry_run)
    if not dry_run:
        repo.require_current("prune")
    if dry_run:  # reads only: no lock, so it can run beside backups (its chunk count is then approximate)
        _run(repo, policies, only_set, now, report, workers, check_lock=lambda: None)
    else:
        with acquire(repo, "exclusive", "prune", wait=lock_wait, ttl=lock_ttl) as lock:
            report.stale_locks_removed = [lock.id for lock in remove_stale_locks(repo)]
            _run(repo, policies, only_set, now, report, workers, check_lock=lock.check)
    report.ignored = dict(repo.skipped)
    return report


def _run(
    repo: Repository,
    policies: Mapping[str, RetentionPolicy],
    only_set: str | None,
    now: dt.datetime,
    report: PruneReport,
    workers: int,
    check_lock: Callable[[], None],
) -> None:
    locking = object_lock_enabled(repo.backend)
    with (
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-prune") as pool,
        tempfile.TemporaryDirectory(prefix="drtool-prune-") as tmp,
    ):
        marks = _forget(repo, policies, only_set, now, report, pool, workers, locking, check_lock, Path(tmp))
        if report.unreadable_manifests:
            report.chunks_referenced = sum(len(ids) for ids in unique_parts(marks))
            return  # a manifest we cannot read may name any chunk: sweep nothing
        if isinstance(repo.chunks, PackedStore):
            _sweep_packs(repo.chunks, marks, locking, now, report, pool, workers, check_lock)
            return
        # format 1 (loose chunks) holds its mark set whole, as it always did
        referenced = np.concatenate([np.zeros(0, dtype="S32"), *unique_parts(marks)])  # parts in id order
        report.chunks_referenced = len(referenced)
        present = set(repo.chunk_ids())
        report.chunks_present = len(present)
        garbage = sorted(present - set(hex_ids(referenced)))
        if report.dry_run:
            report.chunks_deleted = len(garbage)
            return
        for start in range(0, len(garbage), _BATCH):
            check_lock()
            names = [layout.chunk(c) for c in garbage[start : start + _BATCH]]
            report.chunks_deleted += len(_delete(repo.backend, names, locking, now, report, pool))


def _forget(
    repo: Repository,
    policies: Mapping[str, RetentionPolicy],
    only_set: str | None,
    now: dt.datetime,
    report: PruneReport,
    pool: ThreadPoolExecutor,
    workers: int,
    locking: bool,
    check_lock: Callable[[], None],
    tmp: Path,
) -> Spill:
    """Decide, delete the manifests the policies no longer keep, and return the mark set: the chunks every
    surviving manifest and every pending shard names, spilled under ``tmp``."""
    read = _read_all(repo, repo.backup_ids(), report, pool, workers, tmp)
    manifests = [m for m, _ in read]
    report.flagged = {m.id: m.flag for m in manifests if m.flag}
    report.decisions = plan(manifests, policies, now, only_set)
    doomed = {d.backup.id for ds in report.decisions.values() for d in ds if not d.keep}
    if not report.dry_run:
        check_lock()
        names = [layout.manifest(i) for i in sorted(doomed)]
        deleted = _delete(repo.backend, names, locking, now, report, pool)
        report.forgotten = [layout.backup_id_of(n) or n for n in deleted]
    else:
        report.forgotten = sorted(doomed)
    gone = set(report.forgotten)
    marks = Spill(tmp, "marks", np.dtype("S32"))
    for m, path in read:
        if m.id not in gone:
            marks.add(np.fromfile(path, dtype="S32"))
        path.unlink()
    marks.add(pending_chunks(repo, cleanup=not report.dry_run))
    return marks


def _sweep_packs(
    store: PackedStore,
    marks: Spill,
    locking: bool,
    now: dt.datetime,
    report: PruneReport,
    pool: ThreadPoolExecutor,
    workers: int,
    check_lock: Callable[[], None],
) -> None:
    backend = store.repo.backend
    status = backend.lock_status if locking else None  # type: ignore[attr-defined]  # S3 only

    def delete(names: list[str]) -> list[str]:
        for start in range(0, len(names), _BATCH):
            check_lock()
            _delete(backend, names[start : start + _BATCH], False, now, report, pool)
        return names

    figures = repack.sweep(
        store,
        marks,
        dry_run=report.dry_run,
        workers=workers,
        lock_status=(lambda name: status(name, now)) if status else None,
        delete=delete,
        check_lock=check_lock,
    )
    report.locked_objects.update(figures.pop("locked_objects"))  # type: ignore[arg-type]
    for key, value in figures.items():
        setattr(report, key, value)


def _read_all(
    repo: Repository, backup_ids: list[str], report: PruneReport, pool: ThreadPoolExecutor, workers: int, tmp: Path
) -> list[tuple[Manifest, Path]]:
    """Every readable manifest without its chunk lists (retention needs the rest), and a file under ``tmp``
    holding its distinct chunk ids. Fetched ``workers`` at a time in parallel (the latency of S3), opened
    one at a time, with the chunk lists cut out of the JSON before the model parses it
    (drtool/repo/chunk_lists.py): what a manifest costs while it is read is its text and 32 bytes per id."""
    read = []
    for start in range(0, len(backup_ids), workers):
        batch = backup_ids[start : start + workers]
        for backup_id, fetched in zip(batch, pool.map(lambda i: _fetch(repo, i, report), batch), strict=True):
            if fetched is None:
                continue
            cut = ChunkListCut()
            try:
                manifest = repo.open_manifest(backup_id, *fetched, lighten=cut)
            except Unauthentic as exc:
                repo.skip(layout.manifest(backup_id), exc.message)
                continue
            except DrtoolError as exc:
                report.unreadable_manifests[backup_id] = exc.message
                continue
            path = tmp / f"manifest-{len(read)}"
            unique_ids(np.concatenate([cut.ids(), chunk_array(manifest)])).tofile(path)
            read.append((manifest.model_copy(update={"artifacts": []}), path))
    return read


def _fetch(repo: Repository, backup_id: str, report: PruneReport) -> tuple[bytes, dt.datetime | None] | None:
    try:
        return repo.fetch_manifest(backup_id)
    except DrtoolError as exc:
        report.unreadable_manifests[backup_id] = exc.message
        return None


def chunk_array(manifest: Manifest) -> np.ndarray:
    """The distinct chunk ids a manifest names, as sorted 32-byte strings."""
    raw = bytes.fromhex("".join(cid for a in manifest.artifacts for cid, _ in a.chunks))
    return unique_ids(np.frombuffer(raw, dtype="S32").copy())


def pending_chunks(repo: Repository, cleanup: bool) -> np.ndarray:
    """Chunks named by the parts of sharded backups not committed yet (drtool/shards.py): live until then."""

    arrays = [chunk_array(part.manifest) for part in pending_parts(repo, cleanup)]
    return unique_ids(np.concatenate(arrays)) if arrays else np.zeros(0, dtype="S32")


def object_lock_enabled(backend: Backend) -> bool:
    enabled = getattr(backend, "object_lock_enabled", None)
    return bool(enabled and enabled())


def _delete(
    backend: Backend, names: list[str], locking: bool, now: dt.datetime, report: PruneReport, pool: ThreadPoolExecutor
) -> list[str]:
    """Delete ``names``; objects under Object Lock are recorded in the report and kept.

    A backend with ``delete_many`` (S3's DeleteObjects) deletes in batches; others one object per call, in parallel.
    """
    free = names
    if locking:
        status = backend.lock_status  # type: ignore[attr-defined]  # only S3 buckets have Object Lock
        free = []
        for name, held in zip(names, pool.map(lambda n: status(n, now), names), strict=True):
            if held:
                report.locked_objects[name] = held
            else:
                free.append(name)
    delete_many = getattr(backend, "delete_many", None)
    if delete_many is not None:
        delete_many(free)
    else:
        list(pool.map(backend.delete, free))
    return free
