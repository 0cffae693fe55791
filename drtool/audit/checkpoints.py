"""The checkpoint item: the newest complete checkpoint holds the state to continue training, and is recent.

Read from the store, not from the training bucket: the ``checkpoints`` plugin records with each checkpoint it
backs up the pieces of state its format shows (``state``: optimizer, scheduler, step, rng, scaler) and
when it was saved (``saved``, its newest file's mtime). The newest backup holding checkpoints answers; a
checkpoint that was never backed up cannot be restored, so it does not count.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from drtool.durations import format_duration
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository

from .grades import Grade, Status, worst

PLUGIN = "checkpoints"
REQUIRED = ("optimizer", "scheduler", "step", "rng")  # the scaler only where training is mixed-precision
TITLE = "Checkpoints include the complete state needed to continue training, and the latest is recent enough"


def newest_with_checkpoints(repo: Repository) -> Manifest | None:
    def holds(m: Manifest) -> bool:
        outcome = m.plugins.get(PLUGIN)
        return m.trusted and outcome is not None and outcome.status == "ok" and bool(outcome.meta.get("checkpoints"))

    return repo.newest_manifest(repo.backup_ids(), holds)


def checkpoints(repo: Repository | None, rpo: dt.timedelta | None, now: float | None = None) -> Grade:
    """Grade the newest checkpoint of each source in the newest backup that holds checkpoints."""
    if repo is None:
        return Grade("checkpoints", TITLE, "unknown", ["no store given (--store): checkpoints not read"])
    manifest = newest_with_checkpoints(repo)
    if manifest is None:
        return Grade("checkpoints", TITLE, "fail", [f"no backup in {repo.backend.url} holds a complete checkpoint"])
    now = time.time() if now is None else now
    newest: dict[str, dict[str, Any]] = {}
    for ck in manifest.plugins[PLUGIN].meta["checkpoints"]:
        if ck.get("saved", 0) >= newest.get(ck["source"], {}).get("saved", 0):
            newest[ck["source"]] = ck
    evidence: list[str] = []
    statuses: list[Status] = []
    for source, ck in sorted(newest.items()):
        where = f"backup {manifest.id}: {source}/{ck['checkpoint']} ({ck['kind']})"
        if "state" not in ck:
            statuses.append("unknown")
            evidence.append(f"{where}: backed up before drtool recorded checkpoint state")
            continue
        missing = [p for p in REQUIRED if p not in ck["state"]]
        statuses.append("fail" if missing else "pass")
        shown = ", ".join(ck["state"]) or "weights only"
        evidence.append(f"{where}: carries {shown}" + (f"; missing {', '.join(missing)}" if missing else ""))
        age = now - ck.get("saved", 0)
        if rpo is None:
            statuses.append("unknown")
            evidence.append(f"{source}: newest checkpoint saved {format_duration(age)} ago, no training RPO")
        else:
            fresh = age <= rpo.total_seconds()
            statuses.append("pass" if fresh else "fail")
            over = "within" if fresh else "over"
            evidence.append(
                f"{source}: newest checkpoint saved {format_duration(age)} ago, {over} the training RPO of "
                f"{format_duration(rpo)}"
            )
    return Grade("checkpoints", TITLE, worst(statuses), evidence)
