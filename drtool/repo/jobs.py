"""The store format of sharded backups' job folders (`jobs/<job>/`): each worker's sealed part and the job's
backup id (docs/scaling.md). Here, in the store layer, because `check`, `prune` and `repair` read these folders
too, and a keyless writer can put anything in them: every reader skips what does not authenticate by name.
"""

from __future__ import annotations

import contextlib

import zstandard
from pydantic import BaseModel, ValidationError

from drtool.crypto.master import PART
from drtool.errors import IntegrityError, NotFound, ObjectExists
from drtool.repo import layout
from drtool.repo.manifest import Manifest, new_backup_id
from drtool.repo.repository import Repository


class ShardPart(BaseModel):
    """One worker's share of a sharded backup: its plugins' outcomes and artifacts, as a manifest holds them."""

    version: int = 1
    job: str
    index: int
    count: int
    manifest: Manifest


def put_sealed(repo: Repository, name: str, seal_name: str, data: bytes) -> None:
    repo.backend.put(name, repo.key.seal(PART, seal_name, zstandard.ZstdCompressor().compress(data)), exclusive=True)


def get_sealed(repo: Repository, name: str, seal_name: str) -> bytes:
    return zstandard.ZstdDecompressor().decompress(repo.key.unseal(PART, seal_name, repo.backend.get(name)))


def job_backup_id(repo: Repository, job: str) -> str:
    """The backup id every worker of ``job`` writes to: the first claim wins."""
    name = f"{layout.job_parts(job)}backup-id"
    with contextlib.suppress(ObjectExists):
        put_sealed(repo, name, f"{job}/backup-id", new_backup_id().encode())
    return get_sealed(repo, name, f"{job}/backup-id").decode()


def read_parts(repo: Repository, job: str) -> dict[int, ShardPart]:
    """The job's parts that authenticate and parse; any other object in the job's folder is skipped by name
    (a keyless writer can put anything there: it must stop neither this job's other workers nor prune)."""
    parts = {}
    for name in repo.backend.list(layout.job_parts(job)):
        tail = name.rsplit("/", 1)[-1]
        if tail == "backup-id":
            continue
        index = layout.part_index_of(tail)
        if index is None:
            repo.skip(name, "not a shard part name")
            continue
        try:
            part = ShardPart.model_validate_json(get_sealed(repo, name, f"{job}/{index}"))
        except NotFound:
            continue  # removed by the committer since the listing
        except (IntegrityError, zstandard.ZstdError, ValidationError) as exc:
            repo.skip(name, exc.message if isinstance(exc, IntegrityError) else "not a shard part")
            continue
        parts[index] = part
    return parts


def published(repo: Repository, backup_id: str) -> bool:
    return repo.backend.exists(layout.manifest(backup_id))


def remove_job(repo: Repository, job: str) -> None:
    for name in list(repo.backend.list(layout.job_parts(job))):
        repo.backend.delete(name)


def jobs(repo: Repository) -> set[str]:
    return {n[len(layout.JOBS) :].split("/", 1)[0] for n in repo.backend.list(layout.JOBS)}


def pending_parts(repo: Repository, cleanup: bool = False) -> list[ShardPart]:
    """Parts of jobs not committed yet: prune keeps their chunks (and, with ``cleanup``, removes what
    committed jobs left behind)."""
    pending = []
    for job in sorted(jobs(repo)):
        if not layout.JOB_ID.match(job):
            repo.skip(layout.job_parts(job), "not a job id")
            continue
        name = f"{layout.job_parts(job)}backup-id"
        try:
            backup_id = get_sealed(repo, name, f"{job}/backup-id").decode()
        except NotFound:
            backup_id = ""
        except (IntegrityError, zstandard.ZstdError, UnicodeDecodeError) as exc:
            repo.skip(name, exc.message if isinstance(exc, IntegrityError) else "not a backup id")
            backup_id = ""
        if backup_id and published(repo, backup_id):
            if cleanup:
                remove_job(repo, job)  # committed; the committer died before cleaning up
            continue
        pending += read_parts(repo, job).values()
    return pending
