"""What training state a checkpoint carries, and when and how fast it was saved: recorded with each backed-up
checkpoint so `drtool audit` can grade the go-live checklist from the store alone (docs/audit.md).

A checkpoint shows its state where its format does: the tensor names in DCP ``.metadata`` (read by ``dcp``,
which runs nothing), the keys of a safetensors index, and the files beside the weights (``optimizer.pt``,
``rng_state.pth``, ``trainer_state.json``, ...). Its save is the span of its files' modification times.
"""

from __future__ import annotations

import json
from typing import Any

from . import dcp
from .detect import DCP_METADATA, ST_INDEX, Checkpoint
from .location import Location

# the pieces of state, and the name fragments (lower case) that show each
PARTS = {
    "optimizer": ("optim",),
    "scheduler": ("sched",),
    "step": ("step", "trainer_state", "epoch"),
    "rng": ("rng", "random"),
    "scaler": ("scaler",),
}
INDEX_LIMIT = 64 << 20  # a DCP metadata file or safetensors index larger than this is not read for names


def names(loc: Location, ck: Checkpoint) -> list[str]:
    """Every name that can show a piece of state: file names, DCP tensor names, safetensors index keys."""
    found = [ck.rel(f.key) for f in ck.files]
    for f in ck.files:
        if f.size > INDEX_LIMIT:
            continue
        if ck.rel(f.key) == DCP_METADATA:
            meta = dcp.load_metadata(loc.read_range(f.key, 0, f.size)).field("state_dict_metadata") or {}
            found += [str(k) for k in meta]
        elif f.key.endswith(ST_INDEX):
            found += list(json.loads(loc.read_range(f.key, 0, f.size)).get("weight_map") or {})
    return found


def facts(loc: Location, ck: Checkpoint) -> dict[str, Any]:
    """``state`` (the pieces the names show), ``saved`` (newest mtime) and ``save_seconds`` (the save's span)."""
    lowered = [n.lower() for n in names(loc, ck)]
    shown = {part for part, frags in PARTS.items() if any(f in n for n in lowered for f in frags)}
    if ck.step is not None:  # the checkpoint's own name numbers its step (`step-1200`, `checkpoint-500`)
        shown.add("step")
    state = [part for part in PARTS if part in shown]
    times = [f.mtime for f in ck.files if f.mtime]
    span = {"saved": max(times), "save_seconds": round(max(times) - min(times), 3)} if times else {}
    return {"state": state} | span
