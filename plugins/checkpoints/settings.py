"""The plugin's settings: several checkpoint locations per source, plus transfer knobs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_bool, as_count, as_list, as_size

from .detect import DEFAULT_MARKERS
from .ranged import RangedReads

DEFAULT_RESTORE_WORKERS = 4  # objects restored at once: each holds its reads ahead (within one budget) and upload parts
# objects backed up at once: each holds its chunker's windows (up to 24 MiB; the source is read straight
# into them) and a 16 MiB pack buffer, about 40 MiB of peak RSS per object. With 2 packs uploading at once
# (drtool/repo/packed.py) a third object added no throughput on 2 cores and 52 MiB of peak RSS (365 against
# 313 MiB, docs/performance.md);
# objects of 1 GiB or more are read in parallel ranges anyway (``ranged``)
DEFAULT_BACKUP_WORKERS = 2


@dataclasses.dataclass(frozen=True)
class SourceSpec:
    name: str
    location: dict[str, Any]  # url/path, endpoint_url, credentials_file
    markers: tuple[str, ...] = DEFAULT_MARKERS
    run: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    milestones: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class BackupSettings:
    sources: tuple[SourceSpec, ...]
    workers: int = DEFAULT_BACKUP_WORKERS
    retries: int = 2
    reread: bool = False  # True: read every object even when an unchanged copy is in the previous backup
    verify_source_checksums: bool = True
    ranged: RangedReads = dataclasses.field(default_factory=RangedReads)

    @classmethod
    def parse(cls, source: Mapping[str, Any]) -> BackupSettings:
        raw = source.get("sources")
        if raw is None and (source.get("url") or source.get("path")):
            raw = [source]
        if not raw or not isinstance(raw, list):
            raise UsageError(
                "checkpoints needs `sources` (or one `url`/`path`) in its source settings",
                "e.g. checkpoints: {sources: [{url: s3://training/ckpt}, {path: /mnt/ckpt}]}",
            )
        specs = [_spec(i, item) for i, item in enumerate(raw)]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise UsageError(f"checkpoints: source names repeat: {names}", "give each source a distinct `name`")
        return cls(
            tuple(specs),
            workers=max(1, int(source.get("workers", DEFAULT_BACKUP_WORKERS))),
            retries=max(0, int(source.get("retries", 2))),
            reread=as_bool(source.get("reread")),
            verify_source_checksums=as_bool(source.get("verify_source_checksums"), True),
            ranged=RangedReads(
                threshold=as_size(
                    source.get("ranged_threshold"), RangedReads.threshold, "checkpoints: ranged_threshold"
                ),
                range_size=as_size(source.get("range_size"), RangedReads.range_size, "checkpoints: range_size"),
                in_flight=as_count(
                    source.get("ranges_in_flight"), RangedReads.in_flight, "checkpoints: ranges_in_flight"
                ),
            ),
        )


def _spec(i: int, item: Any) -> SourceSpec:
    if isinstance(item, str):
        item = {"url": item}
    if not isinstance(item, Mapping) or not (item.get("url") or item.get("path")):
        raise UsageError(f"checkpoints: source #{i + 1} needs `url: s3://BUCKET/PREFIX` or `path: DIR`")
    where = str(item.get("url") or item.get("path"))
    name = str(item.get("name") or re.sub(r"[^A-Za-z0-9._-]+", "-", where.removeprefix("s3://")).strip("-."))
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"checkpoints: invalid source name {name!r}", "use letters, digits, '-', '_' and '.'")
    location = {k: item[k] for k in ("url", "path", "endpoint_url", "credentials_file") if item.get(k)}
    return SourceSpec(
        name=name,
        location=location,
        markers=tuple(as_list(item.get("markers"))) or DEFAULT_MARKERS,
        run=item.get("run"),
        include=tuple(as_list(item.get("include"))),
        exclude=tuple(as_list(item.get("exclude"))),
        milestones=tuple(as_list(item.get("milestones"))),
    )
