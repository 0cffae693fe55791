"""Reading a backup's artifacts back: which types it holds, and their records as a stream.

A restore reads every artifact once completely before it writes anything (``scan``): the reader checks
each artifact's SHA-256 at its end, so this first pass proves the whole backup intact — the contract's
"stage, then commit" — without staging decrypted Secrets on disk or holding the backup in memory. The
second pass streams the records again while applying them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from drtool.errors import IntegrityError
from drtool.plugin.contract import RestoreContext
from drtool.plugin.toolkit import paths

from .discovery import CRDS, ResourceType

FORMAT = "ndjson-objects-v1"
LEFT_FORMAT = "ndjson-left-to-controllers-v1"  # left.py's records


def types_in(ctx: RestoreContext) -> list[ResourceType]:
    """The resource types of this backup, from each artifact's recorded meta (no source discovery)."""
    out = []
    for art in ctx.artifacts:
        if art.meta.get("format") == LEFT_FORMAT:
            continue  # what the backup left to controllers (left.py), not objects to restore
        if art.meta.get("format") != FORMAT:
            raise IntegrityError(f"artifact {art.name} has unknown format {art.meta.get('format')!r}")
        t = ResourceType.from_meta(dict(art.meta))
        for part, what in ((t.group or "core", "API group"), (t.version, "API version"), (t.resource, "resource")):
            paths.segment(part, f"kubernetes: {what} of {art.name}")
        out.append(t)
    return out


def checked(rec: dict[str, Any], t: ResourceType) -> dict[str, Any]:
    """A record whose object's namespace and name are each one API path segment: they are put into the URL
    the object is applied at, where ``..`` or a '/' would address another resource or a subresource.
    The object is in ``t``'s version: the one it was backed up in, or the one a restore into another
    Kubernetes version sends it in (``versions.py``, which checked the target accepts it so)."""
    meta = rec["object"]["metadata"]
    if meta.get("namespace") is not None:
        paths.segment(meta["namespace"], f"{t.key} namespace")
    paths.segment(meta.get("name"), f"{t.key} name")
    rec["object"]["apiVersion"] = t.api_version
    return rec


def records(ctx: RestoreContext, t: ResourceType) -> Iterator[dict[str, Any]]:
    """Records of one type, one parsed line at a time, straight from the verified stream, each name checked."""
    return (checked(rec, t) for rec in ndjson(ctx, t.artifact))


def ndjson(ctx: RestoreContext, name: str) -> Iterator[dict[str, Any]]:
    """The JSON lines of one artifact, parsed one at a time from the verified stream."""
    with ctx.open(name) as src:
        rest = b""
        for chunk in src:
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        if rest.strip():
            yield json.loads(rest)


@dataclasses.dataclass
class Scan:
    """What the first, verifying pass learnt: counts, and every uid (to tell owners in the backup)."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    uids: set[str] = dataclasses.field(default_factory=set)
    owner_uids: set[str] = dataclasses.field(default_factory=set)
    crd_names: set[str] = dataclasses.field(default_factory=set)  # CRDs the backup itself holds


def scan(ctx: RestoreContext, types: list[ResourceType]) -> Scan:
    out = Scan()
    for t in types:
        n = 0
        for rec in records(ctx, t):
            n += 1
            if rec.get("uid"):
                out.uids.add(rec["uid"])
            out.owner_uids.update(o["uid"] for o in rec.get("owners") or [] if o.get("uid"))
            if t.key == CRDS:
                out.crd_names.add(rec["object"]["metadata"]["name"])
        out.counts[t.key] = n
    return out
