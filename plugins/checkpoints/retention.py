"""The retention hook for checkpoints: keep the last N checkpoints of each run, plus milestones.

drtool's retention engine (drtool/retention.py) decides per backup. A checkpoint lives on in every backup
taken while it existed, so "keep checkpoint X" means "keep at least one backup that holds X". This
function turns the checkpoint facts each backup recorded (the plugin's manifest meta: ``checkpoints``
with ``run``, ``step`` and ``milestone``) into the backups that must stay, with reasons, for the engine to
union with its own decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def backups_to_keep(backups: Sequence[tuple[str, Mapping[str, Any]]], keep_last_per_run: int) -> dict[str, list[str]]:
    """``backups``: (backup id, this plugin's meta in it), any order. Returns backup id -> reasons.

    For each run, the ``keep_last_per_run`` highest steps (checkpoints without a step count as step -1)
    and every milestone checkpoint are kept, each by the newest backup that holds it.
    """
    newest: dict[tuple[str, str, str], str] = {}  # (source, run, checkpoint) -> newest backup id holding it
    facts: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for backup_id, meta in sorted(backups, key=lambda b: b[0]):
        for ck in meta.get("checkpoints") or []:
            ident = (str(ck.get("source")), str(ck.get("run")), str(ck.get("checkpoint")))
            newest[ident] = backup_id
            facts[ident] = ck
    keep: dict[str, list[str]] = {}
    runs: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for ident in facts:
        runs.setdefault(ident[:2], []).append(ident)
    for (_, run), idents in runs.items():
        ordered = sorted(idents, key=lambda i: (_step(facts[i]), i[2]), reverse=True)
        for rank, ident in enumerate(ordered):
            reasons = []
            if rank < keep_last_per_run:
                reasons.append(f"checkpoint {ident[2]}: one of the last {keep_last_per_run} of run {run}")
            if facts[ident].get("milestone"):
                reasons.append(f"checkpoint {ident[2]}: milestone of run {run}")
            if reasons:
                keep.setdefault(newest[ident], []).extend(reasons)
    return keep


def _step(ck: Mapping[str, Any]) -> int:
    step = ck.get("step")
    return step if isinstance(step, int) else -1
