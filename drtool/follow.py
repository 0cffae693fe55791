"""`drtool follow`: run a plugin's continuous backup (a full, then deltas) until SIGTERM.

The core's side of the ``FollowSupport.follow`` hook (drtool/plugin/contract.py): each link of the chain is written as
an ordinary backup of the set, manifest last, with ``kind`` and ``chain`` recorded (docs/store-format.md,
"Delta chains"). So a follower killed at any instant leaves the chain ending at its last durable link, and
the next run continues from ``tip()``. Signals only set a flag: the plugin flushes what it buffered and
returns, and the process exits 0.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.contract import FollowSupport, Plugin, WriteLink
from drtool.plugin.settings import check_sources
from drtool.repo.chains import Link
from drtool.repo.layout import DEFAULT_FOLLOW_SET
from drtool.repo.manifest import ChainLink, Manifest, PluginOutcome, utc_now
from drtool.repo.repository import Repository
from drtool.repo.writer import DEFAULT_LOCK_WAIT, BackupSession, merge_facts

log = logging.getLogger(__name__)
DEFAULT_SET = DEFAULT_FOLLOW_SET


@dataclasses.dataclass(frozen=True)
class TipLink:
    """A chain link with the plugin meta it was written with (what a resuming follower needs)."""

    link: Link
    meta: Mapping[str, Any]


class FollowSession:
    """Implements ``FollowContext`` for one plugin and one backup set."""

    def __init__(
        self,
        repo: Repository,
        plugin: str,
        backup_set: str = DEFAULT_SET,
        options: Mapping[str, Any] | None = None,
        *,
        lock_wait: float = DEFAULT_LOCK_WAIT,
        on_link: Callable[[Manifest], None] | None = None,
    ) -> None:
        self.repo = repo
        self.plugin = plugin
        self.backup_set = backup_set
        self.options = dict(options or {})
        self.lock_wait = lock_wait
        self.on_link = on_link
        self.stop = threading.Event()
        self.links_written = 0

    def stopping(self) -> bool:
        return self.stop.is_set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT ask the follower to flush and return; a second signal changes nothing."""

        def handle(signum: int, frame: FrameType | None) -> None:
            log.info("follow: %s received, flushing and stopping", signal.Signals(signum).name)
            self.stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handle)

    def tip(self) -> TipLink | None:
        """The newest link of this plugin in this set, read from the store (newest manifests first).

        Backup ids order by their start *second* only, and a follower can write several links in one
        second: among the links of the newest second that has one, the last finished wins."""
        best: Manifest | None = None
        for manifest in self.repo.manifests_newest_first(self.repo.backup_ids()):
            if best is not None and not manifest.id.startswith(best.id.split("-")[0]):
                break
            link = manifest.chain
            if (
                link is None
                or link.plugin != self.plugin
                or manifest.backup_set != self.backup_set
                or not manifest.trusted
            ):
                continue
            if best is None or manifest.finished > best.finished:
                best = manifest
        if best is None:
            return None
        outcome = best.plugins.get(self.plugin)
        link = Link.of(best)
        assert link is not None
        return TipLink(link, dict(outcome.meta) if outcome else {})

    def write_full(self, write: WriteLink) -> TipLink:
        return self._write("full", None, write)

    def write_delta(self, after: TipLink, write: WriteLink) -> TipLink:
        return self._write("delta", after.link, write)

    def _write(self, kind: str, after: Link | None, write: WriteLink) -> TipLink:
        with BackupSession(self.repo, backup_set=self.backup_set, lock_wait=self.lock_wait) as session:
            started = utc_now()
            meta, span = write(session.context_for(self.plugin))
            link = ChainLink(
                plugin=self.plugin,
                base=after.base if after else session.backup_id,
                seq=after.seq + 1 if after else 0,
                first=span.first,
                last=span.last,
                first_time=span.first_time,
                last_time=span.last_time,
            )
            meta = dict(meta)
            manifest = commit_link(session, self.plugin, started, meta, kind, link)
        self.links_written += 1
        if self.on_link is not None:
            self.on_link(manifest)
        written = Link.of(manifest)
        assert written is not None
        return TipLink(written, meta)


def commit_link(
    session: BackupSession, plugin: str, started: str, meta: dict[str, Any], kind: str, link: ChainLink
) -> Manifest:
    """Publish ``session`` as a link of a chain: the plugin's outcome, then the manifest (written last)."""
    merge_facts(session.failure_domain, meta.pop("failure_domain", None) or {})
    session.outcomes[plugin] = PluginOutcome(status="ok", started=started, finished=utc_now(), meta=meta)
    session.kind, session.chain = kind, link
    return session.commit()


def run_follow(repo: Repository, plugin: Plugin, source: Mapping[str, Any], session: FollowSession) -> FollowSession:
    """Run ``plugin.follow`` until it returns (after ``session.stop`` is set, or on a fatal error)."""
    if not isinstance(plugin, FollowSupport):
        raise UsageError(
            f"plugin {plugin.name} has no continuous backup mode",
            "`drtool follow` works with plugins that follow a log (`FollowSupport`, docs/plugins.md)",
        )
    check_sources([plugin], {plugin.name: source})
    plugin.follow(source, session)
    return session
