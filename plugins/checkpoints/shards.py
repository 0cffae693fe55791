"""Sharding a checkpoint's objects across the workers of a sharded backup or restore (docs/scaling.md).

Every worker computes the same assignment from the same listing: objects by size, largest first, each to
the least loaded worker (ties by key), so bytes spread evenly even when shard files differ in size. A
checkpoint read by several workers is only whole if they all saw the same checkpoint: each worker records
a fingerprint of the full listing, and ``merge`` drops a checkpoint whose workers disagree (torn across
workers) instead of publishing a mix of two versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from .location import ObjectStat


def assign(objects: Iterable[tuple[str, int]], count: int) -> dict[str, int]:
    """key -> worker index, balancing bytes."""
    load = [0] * count
    out = {}
    for key, size in sorted(objects, key=lambda o: (-o[1], o[0])):
        worker = min(range(count), key=lambda w: (load[w], w))
        out[key] = worker
        load[worker] += size
    return out


def mine(objects: list[ObjectStat], shard: tuple[int, int] | None) -> list[ObjectStat]:
    if shard is None:
        return objects
    index, count = shard
    owner = assign(((o.key, o.size) for o in objects), count)
    return [o for o in objects if owner[o.key] == index]


def fingerprint(objects: Iterable[ObjectStat]) -> str:
    """The whole checkpoint as one worker listed it."""
    return hashlib.sha256("\n".join(sorted(f"{o.key}\t{o.fingerprint}" for o in objects)).encode()).hexdigest()


def merge(metas: list[dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    """The plugin meta of a sharded backup, and the artifacts of checkpoints torn across workers."""
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for meta in metas:
        for entry in meta.get("checkpoints", []):
            seen.setdefault((entry["source"], entry["checkpoint"]), []).append(entry)
    skipped = {(s["source"], s["checkpoint"]): s for meta in metas for s in meta.get("skipped", [])}
    done, dropped = [], set()
    for key, entries in seen.items():
        whole = len(entries) == len(metas) and len({e["fingerprint"] for e in entries}) == 1 and key not in skipped
        if whole:
            done.append({k: v for k, v in entries[0].items() if k != "artifacts"})
        else:
            dropped |= {name for e in entries for name in e.get("artifacts", [])}
            first = {k: entries[0][k] for k in ("source", "checkpoint", "kind")}
            skipped.setdefault(key, first | {"reason": "changed between the workers of a sharded backup; not stored"})
    counters = ("bytes_read", "bytes_reused", "objects_read", "objects_reused", "torn_retries")
    merged = {k: v for k, v in metas[0].items() if k not in ("checkpoints", "skipped", *counters)}
    merged |= {k: sum(int(m.get(k, 0)) for m in metas) for k in counters}
    return merged | {"checkpoints": done, "skipped": list(skipped.values())}, dropped
