"""Sharded backups: N workers (a Kubernetes Indexed Job's pods) write one backup (docs/scaling.md).

Protocol, over the store alone (no coordinator, no extra service):
1. Every worker claims the job's backup id: the first to write ``jobs/<job>/backup-id`` (create-if-absent)
   decides it, the others read it. A job id names one Job (its uid), so a rerun of a failed pod is the same
   job and a new Job is a new backup.
2. Worker ``i`` runs each plugin with ``ctx.shard = (i, N)``: a shardable plugin (checkpoints) takes its share
   of the objects, the others run on worker 0 only. Its chunks go to packs like any backup's, and it flushes
   them (durable and indexed) before it writes its part, ``jobs/<job>/part-<i>``: what a manifest would
   hold, sealed. Nothing is visible yet: parts are not backups.
3. After writing its part, a worker lists the parts; the one that sees all N merges them (each shardable
   plugin merges its shards' facts and drops what is torn across them) and writes the manifest with
   create-if-absent: exactly one commit publishes, a second committer finds it done. Then the parts go.
   A fenced set (drtool/repo/fences.py, a failover took it away) is refused there, as ``BackupSession.commit``
   refuses it: the parts stay, unpublished, until the owner lifts the fence.
A killed worker leaves no part (or a whole one): the backup stays invisible until a rerun of that index
writes it, and the rerun deduplicates against every pack that landed (adopted if it was never indexed).
Prune treats the chunks of uncommitted parts as live, and removes the parts of committed jobs.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from drtool import __version__
from drtool.errors import DrtoolError, IntegrityError, ObjectExists, SourceError, UsageError
from drtool.plugin.contract import Plugin
from drtool.plugin.settings import check_sources
from drtool.progress import Progress
from drtool.repo import layout
from drtool.repo.fences import refuse_if_fenced
from drtool.repo.jobs import (
    ShardPart,
    job_backup_id,
    published,
    put_sealed,
    read_parts,
    remove_job,
)
from drtool.repo.lock import acquire
from drtool.repo.manifest import Manifest, PluginOutcome, utc_now
from drtool.repo.repository import Repository
from drtool.repo.writer import DEFAULT_LOCK_WAIT, BackupSession, merge_facts

if TYPE_CHECKING:
    from drtool.catalog import Catalog

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Published:
    """A published sharded backup; ``published_at`` (``time.monotonic()``) only if this call wrote the manifest."""

    manifest: Manifest
    published_at: float | None = None


@dataclasses.dataclass(frozen=True)
class ShardOutcome:
    """What one worker of a sharded backup did: the backup if it is published, and what the commit cost.

    ``commit_seconds`` is measured where the commit happens, from this worker's part written to the manifest it
    published (reading the N parts, merging them, the lock, the manifest's PUT); None unless this worker
    published. The job's clean-up afterwards is not part of it (the backup is visible by then).
    """

    manifest: Manifest | None
    commit_seconds: float | None = None


def check_job(job: str, index: int, count: int) -> None:
    if not layout.JOB_ID.match(job):
        raise UsageError(f"invalid job id {job!r}", "use the Job's uid or name: lowercase letters, digits, '-', '.'")
    if count < 1 or not 0 <= index < count:
        raise UsageError(
            f"shard index {index} is outside 0..{count - 1}", "set --index or JOB_COMPLETION_INDEX below --count"
        )


def run_shard_backup(
    repo: Repository,
    plugins: Sequence[Plugin],
    sources: Mapping[str, Mapping[str, Any]],
    *,
    job: str,
    index: int,
    count: int,
    backup_set: str | None = None,
    tags: list[str] | None = None,
    progress: Progress | None = None,
    lock_wait: float = DEFAULT_LOCK_WAIT,
    catalog: Catalog | None = None,
) -> ShardOutcome:
    """Back up worker ``index``'s share, then commit if every part is there. The outcome holds the manifest if
    this call (or an earlier one) published the backup, None while parts are still missing."""
    check_job(job, index, count)
    check_sources(plugins, sources)
    backup_id = job_backup_id(repo, job)
    part_written: float | None = None
    if index not in read_parts(repo, job) and not published(repo, backup_id):
        with BackupSession(
            repo, backup_set=backup_set, tags=tags, progress=progress, lock_wait=lock_wait,
            backup_id=backup_id, shard=(index, count),
        ) as session:  # fmt: skip
            for plugin in plugins:
                if getattr(plugin, "shardable", False) or index == 0:
                    session.run_plugin(plugin, sources.get(plugin.name, {}))
            part = ShardPart(job=job, index=index, count=count, manifest=session.seal_contents())
            session.lock.check()  # a prune may have run while this part was written: its chunks could be gone
            try:
                put_sealed(repo, layout.job_part(job, index), f"{job}/{index}", part.model_dump_json().encode())
            except ObjectExists:  # a rerun of this index raced an earlier attempt that finished: either is whole
                if index not in read_parts(repo, job):
                    raise IntegrityError(
                        f"{layout.job_part(job, index)} is taken by an object that does not authenticate "
                        f"(planted?): job {job} cannot publish",
                        "run the backup again as a new job (a new Job uid); `drtool check` lists the object",
                    ) from None
            part_written = time.monotonic()
    done = commit(repo, plugins, job, count, lock_wait=lock_wait)
    if done is None:
        return ShardOutcome(None)
    if catalog is not None:
        catalog.record(done.manifest)
    if done.published_at is None or part_written is None:
        return ShardOutcome(done.manifest)
    seconds = done.published_at - part_written
    log.info("published backup %s from %d part(s): %.3f s after this worker's part", done.manifest.id, count, seconds)
    return ShardOutcome(done.manifest, seconds)


def commit(
    repo: Repository, plugins: Sequence[Plugin], job: str, count: int, *, lock_wait: float = DEFAULT_LOCK_WAIT
) -> Published | None:
    """Publish the job's backup once all ``count`` parts are written; None while some are missing."""
    backup_id = job_backup_id(repo, job)
    if published(repo, backup_id):
        return Published(repo.get_manifest(backup_id))
    parts = read_parts(repo, job)
    if sorted(parts) != list(range(count)):
        return None
    manifest = merge(backup_id, [parts[i] for i in range(count)], {p.name: p for p in plugins})
    with acquire(repo, "shared", f"commit {job} {backup_id}", wait=lock_wait) as lock:
        lock.check()
        refuse_if_fenced(repo, manifest.backup_set)  # a failover took the set away: the parts stay unpublished
        try:
            repo.put_manifest(manifest)
        except DrtoolError:
            if not published(repo, backup_id):
                raise
            return Published(repo.get_manifest(backup_id))  # another worker committed first
        published_at = time.monotonic()
    remove_job(repo, job)
    return Published(manifest, published_at)


def merge(backup_id: str, parts: list[ShardPart], plugins: Mapping[str, Plugin]) -> Manifest:
    """One manifest from the workers' parts; a plugin that failed on any worker failed for the backup."""
    manifests = [p.manifest for p in parts]
    names = list(dict.fromkeys(n for m in manifests for n in m.plugins))
    outcomes: dict[str, PluginOutcome] = {}
    dropped: set[tuple[str, str]] = set()
    for name in names:
        outs = [m.plugins[name] for m in manifests if name in m.plugins]
        started, finished = min(o.started for o in outs), max(o.finished for o in outs)
        failed = next((o for o in outs if o.status == "failed"), None)
        if failed is not None:
            outcomes[name] = failed.model_copy(update={"started": started, "finished": finished})
            dropped |= {(a.plugin, a.name) for m in manifests for a in m.artifacts_of(name)}
            continue
        plugin = plugins.get(name)
        meta, drop = (
            (outs[0].meta, set()) if len(outs) == 1 or plugin is None else plugin.merge_shards([o.meta for o in outs])
        )
        dropped |= {(name, a) for a in drop}
        outcomes[name] = PluginOutcome(status="ok", started=started, finished=finished, meta=meta)
    if outcomes and all(o.status == "failed" for o in outcomes.values()):
        detail = "; ".join(f"{n}: {o.error}" for n, o in outcomes.items())
        raise SourceError(f"sharded backup failed on every plugin, nothing was published: {detail}")
    stats: dict[str, int] = {}
    domain: dict[str, Any] = {}
    for m in manifests:
        for k, v in m.stats.items():
            stats[k] = stats.get(k, 0) + v
        merge_facts(domain, m.failure_domain)
    first = manifests[0]
    return Manifest(
        id=backup_id,
        store_id=first.store_id,
        started=min(m.started for m in manifests),
        finished=utc_now(),
        status="partial" if any(o.status == "failed" for o in outcomes.values()) else "complete",
        hostname=socket.gethostname(),
        drtool_version=__version__,
        backup_set=first.backup_set,
        tags=first.tags,
        plugins=outcomes,
        artifacts=[a for m in manifests for a in m.artifacts if (a.plugin, a.name) not in dropped],
        failure_domain=domain,
        stats=stats | {"shards": len(parts)},
    )
