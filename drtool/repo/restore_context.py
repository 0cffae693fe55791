"""The ``RestoreContext`` a plugin sees: its artifacts of one backup, opened as verified streams.

For a point-in-time restore of a delta chain it is the context of the full the restore starts from, with a
context for each delta to replay (``deltas``) and the ``point`` asked for; their manifests come resolved.

Every artifact a plugin opens through one context (and its deltas) reads ahead out of one ``ByteBudget``:
a plugin restoring many objects at once holds about what one object's read-ahead holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.errors import IntegrityError, NotFound
from drtool.memory import ByteBudget
from drtool.points import Point
from drtool.progress import NullProgress, Progress
from drtool.repo.manifest import ArtifactInfo, Manifest
from drtool.repo.reader import ArtifactReader
from drtool.repo.repository import Repository
from drtool.repo.workers import DEFAULT_WORKERS


class PluginRestoreContext:
    def __init__(
        self,
        repo: Repository,
        manifest: Manifest,
        plugin: str,
        progress: Progress | None = None,
        workers: int = DEFAULT_WORKERS,
        *,
        deltas: Sequence[Manifest] = (),
        point: Point | None = None,
        budget: ByteBudget | None = None,
    ) -> None:
        self.repo = repo
        self.manifest = manifest
        self.plugin = plugin
        self.backup_id = manifest.id
        self.created = manifest.finished
        self._entries = {a.name: a for a in manifest.artifacts_of(plugin)}
        self.artifacts = [
            ArtifactInfo(a.plugin, a.name, a.size, a.sha256, a.meta, a.sensitive) for a in self._entries.values()
        ]
        self.outcome = manifest.plugins.get(plugin)
        self._progress = progress or NullProgress()
        self._workers = workers
        self._budget = budget or ByteBudget()
        self.deltas = [PluginRestoreContext(repo, d, plugin, progress, workers, budget=self._budget) for d in deltas]
        self.point = point

    @property
    def plugin_meta(self) -> dict[str, Any]:
        return dict(self.outcome.meta) if self.outcome else {}

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[ArtifactReader]:
        entry = self._entries.get(name)
        if entry is None:
            raise NotFound(
                f"backup {self.backup_id} has no artifact {self.plugin}/{name}",
                f"`drtool show {self.backup_id}` lists its artifacts",
            )
        with ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="drtool-read") as pool:
            reader = ArtifactReader(self.repo, entry, pool, self._budget, ahead=2 * self._workers)
            try:
                yield reader
            finally:
                reader.close()

    def progress(self, description: str, total: int | None = None) -> Any:
        return self._progress.task(f"{self.plugin}: {description}", total)

    def preflight(self) -> None:
        """Before a restore touches its target: every chunk of this plugin's artifacts is in the store,
        and of the deltas a point-in-time restore will replay."""
        needed = {cid: c.backup_id for c in (self, *self.deltas) for e in c._entries.values() for cid, _ in e.chunks}
        missing = self.repo.chunks.missing(set(needed), self._workers)
        if missing:
            where = sorted({needed[cid] for cid in missing})
            raise IntegrityError(
                f"backup {', '.join(where[:3])} is missing {len(missing)} chunk(s) of plugin {self.plugin}; "
                "nothing was restored",
                "restore an older backup, and run `drtool check` to see the damage",
            )
