"""Which backup a plan restores: ``latest``, an id (or unique prefix), or the latest before a time."""

from __future__ import annotations

import datetime as dt

from drtool.errors import NotFound
from drtool.plans.schema import LatestBefore, Source
from drtool.repo.repository import Repository


def backup_time(backup_id: str) -> dt.datetime:
    """When a backup started, from its id (``20261129T104500Z-1a2b3c``): no manifest read needed."""
    return dt.datetime.strptime(backup_id.split("-")[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)


def resolve_backup(repo: Repository, source: Source, override: str | None = None) -> str:
    """The backup id ``source`` (or ``override``, a backup reference from the command line) names.

    With ``backup-set``, only backups of that set count (their manifests are read, newest first).
    """
    ref = override or source.backup
    if isinstance(ref, str) and ref != "latest":
        return repo.resolve(ref)
    before = ref.latest_before if isinstance(ref, LatestBefore) else None
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=dt.UTC)
    candidates = [i for i in repo.backup_ids() if before is None or backup_time(i) < before]
    for manifest in repo.manifests_newest_first(candidates):
        if manifest.is_delta or (source.backup_set and manifest.backup_set != source.backup_set):
            continue  # a delta is restored through its chain's full (`--at`), never alone
        return manifest.id
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
