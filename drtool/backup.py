"""Running a backup: every selected plugin streams into one session; the manifest is written last."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from drtool.errors import SourceError
from drtool.plugin.contract import Plugin
from drtool.plugin.settings import check_sources
from drtool.progress import Progress
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import DEFAULT_LOCK_WAIT, BackupSession

if TYPE_CHECKING:
    from drtool.catalog.quick import Recorder  # a Catalog, or the sqlite3 recorder (no SQLAlchemy to import)

log = logging.getLogger(__name__)


def run_backup(
    repo: Repository,
    plugins: Sequence[Plugin],
    sources: Mapping[str, Mapping[str, Any]],
    *,
    catalog: Recorder | None = None,
    backup_set: str | None = None,
    tags: list[str] | None = None,
    progress: Progress | None = None,
    lock_wait: float = DEFAULT_LOCK_WAIT,
    force_read: bool = False,
) -> Manifest:
    """Back up with each plugin; a failing plugin makes the backup partial. If all fail, nothing is written.

    ``lock_wait``: seconds to wait for a prune holding the store exclusively before giving up.
    ``force_read``: build on no earlier backup: every plugin reads its whole source, unchanged or not.
    """
    check_sources(plugins, sources)
    with BackupSession(
        repo, backup_set=backup_set, tags=tags, progress=progress, lock_wait=lock_wait, force_read=force_read
    ) as session:
        for plugin in plugins:
            log.debug("backup: running plugin %s", plugin.name)
            session.run_plugin(plugin, sources.get(plugin.name, {}))
            outcome = session.outcomes.get(plugin.name)
            log.debug("backup: plugin %s %s", plugin.name, outcome.status if outcome else "produced nothing")
        failures = {name: o.error for name, o in session.outcomes.items() if o.status == "failed"}
        for name, err in failures.items():
            log.info("backup: plugin %s failed: %s", name, err)
        if failures and len(failures) == len(plugins):
            detail = "; ".join(f"{name}: {err}" for name, err in failures.items())
            raise SourceError(f"backup failed, nothing was written: {detail}")
        manifest = session.commit()
    log.debug("backup %s committed: %s, %d artifact(s)", manifest.id, manifest.status, len(manifest.artifacts))
    if catalog is not None:
        catalog.record(manifest)
        log.debug("backup %s recorded in the catalog", manifest.id)
    return manifest
