"""Which backup a plan restores: ``latest``, an id (or unique prefix), or the latest before a time."""

from __future__ import annotations

import datetime as dt

from drtool.errors import NotFound
from drtool.plans.schema import LatestBefore, Source
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository


def backup_time(backup_id: str) -> dt.datetime:
    """When a backup started, from its id (``20261129T104500Z-1a2b3c``): no manifest read needed."""
    return dt.datetime.strptime(backup_id.split("-")[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)


def resolve_backup(repo: Repository, source: Source, override: str | None = None) -> str:
    """The backup id ``source`` (or ``override``, a backup reference from the command line) names.

    ``latest`` and ``latest-before`` read manifests newest first: deltas of a chain never count, and with
    ``backup-set`` only backups of that set do.
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
    candidates = [i for i in repo.backup_ids() if before is None or backup_time(i) < before]
    manifest = repo.newest_manifest(
        candidates,  # a delta is restored through its chain's full (`--at`), never alone
        lambda m: not m.is_delta and (not source.backup_set or m.backup_set == source.backup_set),
        read,
    )
    if manifest is not None:
        return manifest.id, manifest
    wanted = " ".join(
        part
        for part in (
            f"before {before:%Y-%m-%dT%H:%M:%SZ}" if before else "",
            f"in set {source.backup_set!r}" if source.backup_set else "",
        )
        if part
    )
    raise NotFound(
        f"store {repo.backend.url} holds no backup{' ' + wanted if wanted else ''}",
        "see `drtool list`; run `drtool backup` first or change the plan's source",
    )
