"""Which backup a plan restores: ``latest``, an id (or unique prefix), or the latest before a time."""

from __future__ import annotations

import datetime as dt

from drtool.errors import NotFound
from drtool.plans.schema import LatestBefore, Source
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository, flagged_note
from drtool.repo.times import id_time, parse_time


def resolve_backup(repo: Repository, source: Source, override: str | None = None) -> str:
    """The backup id ``source`` (or ``override``, a backup reference from the command line) names.

    ``latest`` and ``latest-before`` read manifests newest first: deltas of a chain never count, nor do
    flagged backups (their stated times disagree with the store's clock, drtool/repo/times.py), and with
    ``backup-set`` only backups of that set do. ``latest-before T`` is the newest backup that *finished*
    before T: one that ran across T may hold state from after it, and a finish time is what the store's
    clock vouches for (a start time is the writer's word alone).
    """
    return _choose(repo, source, override)[0]


def find_backup(
    repo: Repository, source: Source, override: str | None = None, read: list[Manifest] | None = None
) -> Manifest:
    """The manifest of the backup ``resolve_backup`` names, read once: a run passes it on by value. Every
    manifest read while choosing goes to ``read`` when given (``Repository.find_backup`` says why)."""
    backup_id, manifest = _choose(repo, source, override, read)
    return manifest or repo.find_backup(backup_id, read)


def _choose(
    repo: Repository, source: Source, override: str | None, read: list[Manifest] | None = None
) -> tuple[str, Manifest | None]:
    """The backup id, and its manifest when choosing it meant reading it (``latest``, ``latest-before``)."""
    ref = override or source.backup
    if isinstance(ref, str) and ref != "latest":
        return repo.resolve(ref), None
    before = ref.latest_before if isinstance(ref, LatestBefore) else None
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=dt.UTC)
    # a trusted manifest's id time is at most its finish time plus the skew (drtool/repo/times.py)
    candidates = [i for i in repo.backup_ids() if before is None or id_time(i) < before + repo.max_skew]
    seen: list[Manifest] = [] if read is None else read

    def wanted(m: Manifest) -> bool:
        return (
            not m.is_delta  # a delta is restored through its chain's full (`--at`), never alone
            and (before is None or parse_time(m.finished) < before)
            and (not source.backup_set or m.backup_set == source.backup_set)
        )

    manifest = repo.newest_manifest(candidates, lambda m: wanted(m) and m.trusted, seen)
    if manifest is None and before is None:  # flagging never empties `latest` (Repository.despite_moved_times)
        manifest = repo.despite_moved_times(seen, wanted)
    if manifest is not None:
        return manifest.id, manifest
    what = " ".join(
        part
        for part in (
            f"before {before:%Y-%m-%dT%H:%M:%SZ}" if before else "",
            f"in set {source.backup_set!r}" if source.backup_set else "",
        )
        if part
    )
    raise NotFound(
        f"store {repo.backend.url} holds no backup{' ' + what if what else ''}{flagged_note(seen)}",
        "see `drtool list`; run `drtool backup` first or change the plan's source",
    )
