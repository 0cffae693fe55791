"""Writing a backup: artifacts streamed through the chunker into a bounded pool of seal-and-upload workers.

Memory stays bounded by the chunker window plus the chunks and packs in flight (drtool/repo/loose.py,
drtool/repo/packed.py), whatever the artifact size.
The manifest is written by ``BackupSession.commit`` only after every chunk upload has finished, and only
while the session still holds its shared store lock (drtool/repo/lock.py), so a prune never removes a chunk
this backup deduplicated against.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from drtool import __version__
from drtool.errors import DrtoolError, IntegrityError, StoreUnavailable, UsageError
from drtool.progress import NullProgress, Progress
from drtool.repo import layout
from drtool.repo.chunker import StreamChunker
from drtool.repo.chunks import ChunkRef, ChunkWriter, Stats
from drtool.repo.fences import refuse_if_fenced
from drtool.repo.layout import DEFAULT_LOCK_WAIT
from drtool.repo.lock import DEFAULT_TTL, acquire
from drtool.repo.manifest import ArtifactEntry, ArtifactInfo, ChainLink, Manifest, PluginOutcome, new_backup_id, utc_now
from drtool.repo.repository import Repository
from drtool.repo.workers import DEFAULT_WORKERS

log = logging.getLogger(__name__)


def merge_facts(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    """Merge one plugin's failure-domain facts: lists are unioned, mappings merged, so plugins add up."""
    for key, value in new.items():
        old = into.get(key)
        if isinstance(old, list) and isinstance(value, list):
            into[key] = old + [v for v in value if v not in old]
        elif isinstance(old, dict) and isinstance(value, Mapping):
            merge_facts(old, value)
        else:
            into[key] = value


class ArtifactWriter:
    """The ``ArtifactSink`` a plugin writes to; ``close`` waits for its chunks and yields its entry."""

    def __init__(self, session: BackupSession, plugin: str, name: str, meta: Mapping[str, Any], sensitive: bool):
        self._session = session
        self._chunker = StreamChunker(session.repo.config.chunker, session.repo.gear)
        self._sha = hashlib.sha256()
        self._stream = session.chunks.stream()
        self._size = 0
        self.sha256: str | None = None  # set when the artifact is closed: a plugin may compare it with its source
        self._broken = False
        self.meta = dict(meta)  # a plugin may add to it until the artifact is closed (e.g. an index of it)
        self.entry_fields = {"plugin": plugin, "name": name, "sensitive": sensitive}
        self._written = 0  # chunks handed to the stream so far
        self._splices: list[tuple[int, list[ChunkRef]]] = []  # (written chunks before it, spliced chunks)
        self._spliced = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Take more bytes. After a write has failed (a store error, or a signal handler raising mid-cut) the
        artifact is doomed: later writes, such as those a tarfile makes while unwinding, are dropped, so the
        error that doomed it is the one the caller sees."""
        if self._broken:
            return len(data)
        try:
            self._size += len(data)
            # hashed as it arrives, while it is still in the CPU's cache (a source just read it): 0.55 CPU-s
            # per GiB here, against 0.9 for the same SHA-256 over chunks cut later from a 16 MiB window
            self._sha.update(data)
            self._submit(self._chunker.feed(data))
        except BaseException:
            self._broken = True
            raise
        return len(data)

    def read_from(self, readinto: Callable[[memoryview], int], limit: int) -> memoryview:
        """Read up to ``limit`` bytes from a source's ``readinto`` straight into the chunker's window, and
        return them (empty at the source's end): no bytes object per read and no join before chunking, so
        a stream holds its windows only (docs/performance.md, "The S3 path's memory"). The view stays valid
        while it is held: the window is reused only once no view of it is left."""
        if self._broken:
            return memoryview(b"")
        try:
            room = self._chunker.room()[:limit]
            data = room[: readinto(room)]
            self._size += len(data)
            self._sha.update(data)  # while the bytes are in the CPU's cache, as in ``write``
            self._submit(self._chunker.filled(len(data)))
        except BaseException:
            self._broken = True
            raise
        return data

    def _submit(self, chunks: list[memoryview]) -> None:
        for chunk in chunks:
            self._stream.add(chunk)
        self._written += len(chunks)

    def mark(self) -> int:
        """End the chunk being cut here, so what is written next starts a new chunk; return how many chunks
        the artifact has so far (the index of the next one). A plugin records the chunks between two marks
        (a file's bytes) to ``splice`` them into a later backup unread."""
        self._submit(self._chunker.finish())
        return self._written + self._spliced

    def splice(self, previous: str, start: int, count: int) -> bool:
        """Append chunks ``start`` to ``start + count`` of this plugin's earlier artifact ``previous`` (from
        ``previous_artifacts``) without reading them; False when that cannot be done (no such artifact or
        chunks, or one no longer in the store): the caller then writes the bytes.

        An artifact with spliced chunks has no whole-stream SHA-256 (its bytes were never all seen):
        ``sha256`` is empty. Its integrity rests, as for every artifact, on the keyed chunk ids the
        authenticated manifest lists (drtool/repo/reader.py)."""
        entry = self._session.previous_entries(self.entry_fields["plugin"]).get(previous)
        refs = entry.chunks[start : start + count] if entry is not None and start >= 0 else []
        if len(refs) != count or not count or not all(cid in self._session.chunks for cid, _ in refs):
            return False
        self.mark()
        self._splices.append((self._written, refs))
        self._spliced += count
        size = sum(length for _, length in refs)
        self._size += size
        self._session.stats.add(bytes_reused=size, chunks=count)  # referenced, as a written chunk is
        return True

    def close(self) -> ArtifactEntry:
        self._submit(self._chunker.finish())
        written = self._stream.finish()
        chunks: list[ChunkRef] = []
        done = 0
        for before, refs in self._splices:
            chunks += written[done:before] + refs
            done = before
        chunks += written[done:]
        self.sha256 = "" if self._splices else self._sha.hexdigest()
        return ArtifactEntry(size=self._size, sha256=self.sha256, chunks=chunks, meta=self.meta, **self.entry_fields)

    def abandon(self) -> None:
        self._stream.abandon()


class PluginBackupContext:
    """The ``BackupContext`` one plugin sees during a backup."""

    def __init__(self, session: BackupSession, plugin: str) -> None:
        self._session = session
        self.plugin = plugin
        self.backup_id = session.backup_id
        self.shard = session.shard  # (index, count) in a sharded backup (docs/scaling.md), else None

    @contextlib.contextmanager
    def artifact(
        self, name: str, *, meta: Mapping[str, Any] | None = None, sensitive: bool = False
    ) -> Iterator[ArtifactWriter]:
        self._check_name(name)
        writer = ArtifactWriter(self._session, self.plugin, name, meta or {}, sensitive)
        try:
            yield writer
        except BaseException:
            writer.abandon()
            raise
        self._session.artifacts.append(writer.close())

    def _check_name(self, name: str) -> None:
        if any(a.plugin == self.plugin and a.name == name for a in self._session.artifacts):
            raise UsageError(f"plugin {self.plugin} wrote artifact {name!r} twice")
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise UsageError(f"plugin {self.plugin} used an invalid artifact name {name!r}")

    def progress(self, description: str, total: int | None = None) -> Any:
        return self._session.progress.task(f"{self.plugin}: {description}", total)

    # -- incremental by reference (docs/store-format.md, "Reusing an artifact") ---------------------------

    def previous_artifacts(self) -> list[ArtifactInfo]:
        """This plugin's artifacts in the newest earlier backup of the same backup set where it succeeded.

        A plugin that can tell a source object is unchanged (an ETag, size and mtime recorded in the old
        artifact's meta) hands the old artifact to ``reuse`` instead of reading the object again.
        """
        return [
            ArtifactInfo(e.plugin, e.name, e.size, e.sha256, e.meta, e.sensitive)
            for e in self._session.previous_entries(self.plugin).values()
        ]

    def reuse(
        self, name: str, previous: str, *, meta: Mapping[str, Any] | None = None, sensitive: bool = False
    ) -> bool:
        """Record artifact ``name`` with the content of ``previous`` (from ``previous_artifacts``), unread.

        Only the chunk list is copied; it is checked against the store first, so a chunk pruned since is
        never referenced. Returns False when that cannot be done: the caller then writes the artifact.
        """
        entry = self._session.previous_entries(self.plugin).get(previous)
        if entry is None or not all(cid in self._session.chunks for cid, _ in entry.chunks):
            return False
        self._check_name(name)
        update = {"name": name, "meta": dict(meta if meta is not None else entry.meta), "sensitive": sensitive}
        self._session.artifacts.append(entry.model_copy(update=update))
        self._session.stats.add(bytes_reused=entry.size)
        return True

    def discard(self, name: str) -> None:
        """Drop an artifact this plugin closed earlier in this backup (e.g. its source changed after it was
        read, so the set it belongs to would be torn). Its chunks stay as orphans for `drtool prune`, or are
        deduplicated against later. Call it while none of this plugin's artifacts is open."""
        arts = self._session.artifacts
        arts[:] = [a for a in arts if not (a.plugin == self.plugin and a.name == name)]


class BackupSession:
    """One backup being written. Use as a context manager; nothing is visible until ``commit``."""

    def __init__(
        self,
        repo: Repository,
        *,
        backup_set: str | None = None,
        tags: list[str] | None = None,
        workers: int = DEFAULT_WORKERS,
        progress: Progress | None = None,
        lock_wait: float = DEFAULT_LOCK_WAIT,
        lock_ttl: float = DEFAULT_TTL,
        backup_id: str | None = None,
        shard: tuple[int, int] | None = None,
        force_read: bool = False,
    ) -> None:
        repo.require_current("write a backup")
        self.repo = repo
        self.backup_id = backup_id or new_backup_id()
        self.shard = shard
        self.started = utc_now()
        self.backup_set = backup_set
        self.tags = tags or []
        self.artifacts: list[ArtifactEntry] = []
        self.outcomes: dict[str, PluginOutcome] = {}
        self.failure_domain: dict[str, Any] = {}
        self.stats = Stats()
        self.kind = "full"  # continuous backups (drtool/follow.py) set these two before commit
        self.chain: ChainLink | None = None
        self.progress = progress or NullProgress()
        self.force_read = force_read  # no earlier backup is built on: every plugin reads its whole source
        self._previous: dict[str, dict[str, ArtifactEntry]] = {}
        self._previous_lock = threading.Lock()
        # taken before the chunk index is first read: what this backup dedups against stays in the store
        owner = f"backup {backup_set or '-'} {self.backup_id}"
        self.lock = acquire(repo, "shared", owner, wait=lock_wait, ttl=lock_ttl)
        try:
            self.chunks: ChunkWriter = repo.chunks.writer(self.stats, workers)
        except BaseException:
            self.lock.release()
            raise

    def __enter__(self) -> BackupSession:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.chunks.close()
        finally:
            self.lock.release()

    def previous_entries(self, plugin: str, lookback: int = 50) -> dict[str, ArtifactEntry]:
        """``plugin``'s artifacts by name in the newest of the last ``lookback`` backups of this backup set
        where it succeeded; read once per session. Safe to build on: the session's shared lock keeps a
        prune from removing their chunks until this backup's manifest is written."""
        with self._previous_lock:
            if self.force_read:
                return {}
            if plugin not in self._previous:
                best: Manifest | None = None
                for backup_id in reversed(self.repo.backup_ids()[-lookback:]):
                    if best is not None and not backup_id.startswith(best.id.split("-")[0]):
                        break  # ids sort by their start second; within one second, by finish time below
                    try:
                        manifest = self.repo.get_manifest(backup_id)
                    except IntegrityError as exc:  # planted or damaged: lends nothing, stops nothing
                        self.repo.skip(layout.manifest(backup_id), exc.message)
                        continue
                    outcome = manifest.plugins.get(plugin)
                    usable = (
                        manifest.backup_set == self.backup_set
                        and manifest.trusted  # a forged one must not lend its chunks to a genuine backup
                        and manifest.generation == self.repo.key.generation  # chunk ids are per key
                        and not manifest.is_delta
                        and outcome is not None
                        and outcome.status == "ok"
                    )
                    if usable and (best is None or manifest.finished > best.finished):
                        best = manifest
                self._previous[plugin] = {a.name: a for a in best.artifacts_of(plugin)} if best else {}
            return self._previous[plugin]

    def context_for(self, plugin: str) -> PluginBackupContext:
        return PluginBackupContext(self, plugin)

    def run_plugin(self, plugin: Any, source: Mapping[str, Any]) -> PluginOutcome:
        """Run one plugin's backup; a DrtoolError marks it failed and drops its artifacts, others go on."""
        started = utc_now()
        before = len(self.artifacts)
        try:
            meta = dict(plugin.backup(source, self.context_for(plugin.name)) or {})
            outcome = PluginOutcome(status="ok", started=started, finished=utc_now(), meta=meta)
            merge_facts(self.failure_domain, meta.pop("failure_domain", None) or {})
        except StoreUnavailable:
            raise  # the store is failing, not this plugin's source: stop the whole backup
        except DrtoolError as exc:
            del self.artifacts[before:]
            outcome = PluginOutcome(status="failed", error=exc.one_line(), started=started, finished=utc_now())
        self.outcomes[plugin.name] = outcome
        return outcome

    def commit(self) -> Manifest:
        """Write the manifest, last: from this moment on the backup exists."""
        manifest = self.seal_contents()
        self.lock.check()  # a lost lock means a prune may have run: publish nothing
        refuse_if_fenced(self.repo, self.backup_set)  # a failover took the set away (docs/standby.md)
        self.repo.put_manifest(manifest)
        return manifest

    def seal_contents(self) -> Manifest:
        """Flush every chunk (durable and indexed), then describe what this session wrote as a manifest; a
        sharded backup's worker stores it as its part instead (drtool/shards.py)."""
        self.chunks.flush()
        failed = any(o.status == "failed" for o in self.outcomes.values())
        return Manifest(
            id=self.backup_id,
            store_id=self.repo.config.store_id,
            started=self.started,
            finished=utc_now(),
            status="partial" if failed else "complete",
            hostname=socket.gethostname(),
            drtool_version=__version__,
            backup_set=self.backup_set,
            tags=self.tags,
            plugins=self.outcomes,
            artifacts=self.artifacts,
            failure_domain=self.failure_domain,
            stats=dict(self.stats.values),
            kind=self.kind,
            chain=self.chain,
        )
