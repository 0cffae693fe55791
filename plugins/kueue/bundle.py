"""A kueue backup read back into memory, every artifact to its end (so the store has verified each one).

Kueue configuration is small — hundreds of objects, a few thousand in the largest clusters, a few MB —
so a restore holds it whole: references can then be checked and cohorts ordered parents-first before
anything is written, and "stage, then commit" needs no staging on disk (Secrets stay in memory only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from drtool.kube.artifacts import records, types_in
from drtool.kube.discovery import ResourceType
from drtool.plugin.contract import RestoreContext

from .kinds import DEFAULT_KUEUE_NAMESPACE, GROUP
from .refs import object_key

Obj = dict[str, Any]


@dataclasses.dataclass
class Bundle:
    types: dict[str, ResourceType]
    records: dict[str, list[Obj]]  # type key -> records ({"object": ..., "uid": ..., "status": ...})
    kueue_namespace: str = DEFAULT_KUEUE_NAMESPACE
    _names: dict[str, set[str]] = dataclasses.field(default_factory=dict, repr=False)

    def objects(self) -> dict[str, list[Obj]]:
        return {k: [r["object"] for r in recs] for k, recs in self.records.items()}

    def names(self, key: str) -> set[str]:
        """Keys (``name`` or ``namespace/name``) of the backup's objects of one type."""
        if key not in self._names:
            self._names[key] = {object_key(r["object"]) for r in self.records.get(key, ())}
        return self._names[key]

    def kueue_types(self) -> list[ResourceType]:
        return [t for t in self.types.values() if t.group == GROUP]

    @property
    def count(self) -> int:
        return sum(len(r) for r in self.records.values())


def load(ctx: RestoreContext, only: Iterable[str] | None = None) -> Bundle:
    """Every record of the backup (or of the ``only`` type keys), each artifact verified at its end."""
    wanted = set(only) if only is not None else None
    types = {t.key: t for t in types_in(ctx) if wanted is None or t.key in wanted}
    namespace = str((ctx.plugin_meta or {}).get("kueue_namespace") or DEFAULT_KUEUE_NAMESPACE)
    return Bundle(types, {k: list(records(ctx, t)) for k, t in types.items()}, namespace)
