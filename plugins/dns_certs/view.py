"""The backup as the toolkit's Kubernetes code sees it: only the artifacts in its format (and optionally
only some types), so its restore, verify and dependency code runs unchanged on a dns-certs backup."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drtool.kube.artifacts import FORMAT, records, types_in
from drtool.kube.discovery import ResourceType
from drtool.plugin.contract import ArtifactInfo, RestoreContext

Obj = dict[str, Any]


class KubeView:
    """A ``RestoreContext`` limited to Kubernetes object artifacts, minus the types in ``without``."""

    def __init__(self, ctx: RestoreContext, without: Iterable[str] = ()) -> None:
        skip = set(without)
        self._ctx = ctx
        self.artifacts: list[ArtifactInfo] = [
            a for a in ctx.artifacts if a.meta.get("format") == FORMAT and _key(a) not in skip
        ]

    def __getattr__(self, name: str) -> Any:  # backup_id, created, plugin_meta, open, progress
        return getattr(self._ctx, name)

    def types(self) -> dict[str, ResourceType]:
        return {t.key: t for t in types_in(self)}  # type: ignore[arg-type]

    def records(self, key: str) -> list[Obj]:
        """Every record of one type (small types only: the ones this plugin applies itself)."""
        t = self.types().get(key)
        return list(records(self, t)) if t else []  # type: ignore[arg-type]


def _key(a: ArtifactInfo) -> str:
    group, resource = a.meta.get("group") or "", a.meta.get("resource", "")
    return f"{resource}.{group}" if group else resource


def only(ctx: RestoreContext, keys: Iterable[str]) -> KubeView:
    """A view of just the types ``keys``."""
    view = KubeView(ctx)
    wanted = set(keys)
    view.artifacts = [a for a in view.artifacts if _key(a) in wanted]
    return view
