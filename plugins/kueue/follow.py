"""`drtool follow -p kueue`: the kueue plugin's ``Scope`` for drtool.kube.follow.

Deltas follow the Kueue configuration kinds (kinds.CONFIG: flavors, cohorts, queues, checks, ...), every
object of each; runtime kinds (Workloads) stay out as in a backup. What a full adds so that it restores
alone (the MultiKueue kubeconfig Secrets, the namespaces, the Kueue CRDs) is in the chain's full backup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.kube.client import KubeClient
from drtool.kube.follow import Obj, Watched
from drtool.kube.follow import follow as follow_scope
from drtool.plugin.contract import BackupContext, FollowContext

from . import backup as _backup
from .cluster import connect, require_kueue, served
from .kinds import CONFIG


def _everything(_obj: Obj) -> bool:
    return True


class KueueScope:
    def __init__(self, source: Mapping[str, Any]) -> None:
        self.source = source

    def connect(self) -> KubeClient:
        return connect(self.source)

    def full(self, ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(self.source, ctx)

    def watched(self, client: KubeClient) -> dict[str, Watched]:
        kueue = served(client).kueue()
        require_kueue(kueue, client.server)
        return {key: Watched(kueue[key], _everything) for key in CONFIG if key in kueue}


def follow(source: Mapping[str, Any], ctx: FollowContext) -> None:
    follow_scope(KueueScope(source), ctx)
