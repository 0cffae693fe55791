"""Scenario ``bad-write``: a mass delete at time T (a script with the wrong selector, `kubectl delete
configmaps --all -n team-x`), while the cluster lives on; recovered by a point-in-time restore of etcd to
just before T from the follower's chain (restore-plans/bad-write-pitr.yaml, `at:`), judged on the restored
member: every object the bad write deleted is there as it was at T, and what the cluster wrote after T is
not.

The chain must be followed while the bad write happens (`drtool follow -p etcd`): the failure counts as
detected once the objects are gone from the cluster *and* the store holds a delta past the delete, since
only then can a restore reach the point before it. The restored member is an etcd, not yet a serving
cluster: starting kube-apiserver on it is the control-plane plan's next step (docs/etcd.md); the drill's
time to service ends when the member is judged.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import time
from pathlib import Path
from typing import Any

import requests

from drtool.errors import SourceError, UsageError
from drtool.follow import FollowSession
from drtool.kube.client import KubeClient
from drtool.kube.readings import items
from drtool.repo.repository import Repository
from drtool.servers.etcd import EtcdServer

from .run import Judged

PREFIX = "/registry"  # where kube-apiserver keeps objects in etcd (its --etcd-prefix default)
MARKER_SUFFIX = ".drtool-restore.json"  # the etcd restore's sidecar marker: it names the member it started


@dataclasses.dataclass
class BadWrite:
    namespace: str  # whose ConfigMaps the bad write deletes, all at once
    repo: Repository  # the store the etcd follower writes its chain to
    data_dir: str  # where the plan restores the new member (the judge reads its marker)
    backup_set: str = "follow"  # the follower's set
    scenario: str = "bad-write"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: ["ran `drtool restore --plan restore-plans/bad-write-pitr.yaml` with AT before T"]
    )
    deleted: list[str] = dataclasses.field(default_factory=list)  # names, as they were at T
    after: str = ""  # a ConfigMap written after T: the restore must not bring it
    at: float = 0.0  # T: when the bad write's request was sent

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps"

    def _names(self, client: KubeClient) -> set[str]:
        return {o["metadata"]["name"] for o in items(client, self.path)}

    def inject(self, client: KubeClient) -> None:
        self.deleted = sorted(self._names(client))
        if not self.deleted:
            raise UsageError(f"namespace {self.namespace} has no ConfigMaps: nothing to delete", "name another")
        self.at = time.time()
        client.request("DELETE", self.path, ok=(200,))  # the bad write: one deletecollection
        self.after = f"written-after-the-bad-write-{secrets.token_hex(3)}"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": self.after}, "data": {"at": "after T"}}
        client.request("POST", self.path, body=json.dumps(body).encode(), ok=(201,))

    def _chain_past_t(self) -> bool:
        tip = FollowSession(self.repo, "etcd", self.backup_set).tip()
        return tip is not None and tip.link.last_time.timestamp() > self.at

    def detected(self, client: KubeClient) -> bool:
        """The deleted ConfigMaps are gone, and the follower's chain has recorded past the delete."""
        return not set(self.deleted) & self._names(client) and self._chain_past_t()

    def pending(self, client: KubeClient) -> str:
        left = sorted(set(self.deleted) & self._names(client))
        return f"still there: {', '.join(left)}" if left else "the etcd follower has written no delta past T"

    def judge(self, client: KubeClient) -> list[Judged]:
        """On the restored member: every deleted ConfigMap's key present, the one written after T absent."""
        marker = Path(self.data_dir).with_name(Path(self.data_dir).name + MARKER_SUFFIX)
        server = EtcdServer.from_state(dict(json.loads(marker.read_text())["server"]))
        keys = {name: f"{PREFIX}/configmaps/{self.namespace}/{name}" for name in [*self.deleted, self.after]}
        held = {name: _has_key(server, key) for name, key in keys.items()}
        back = [n for n in self.deleted if held[n]]
        return [
            Judged(
                "as of T", len(back) == len(self.deleted), f"{len(back)}/{len(self.deleted)} deleted ConfigMaps back"
            ),
            Judged(
                "nothing after T", not held[self.after], f"{self.after} {'present' if held[self.after] else 'absent'}"
            ),
        ]


def _has_key(server: EtcdServer, key: str) -> bool:
    """One range request (count only) through the member's gRPC gateway."""
    settings: dict[str, Any] = {k.removeprefix("ETCD_").lower(): v for k, v in server.env().items()}
    endpoint = str(settings["endpoints"]).split(",")[0]
    cert = (settings["cert"], settings["key"]) if settings.get("cert") else None
    body = {"key": base64.b64encode(key.encode()).decode(), "count_only": True}
    try:
        resp = requests.post(f"{endpoint}/v3/kv/range", json=body, verify=settings.get("cacert") or True, cert=cert,
                             timeout=30)  # fmt: skip
        resp.raise_for_status()
    except requests.RequestException as exc:
        raise SourceError(f"the restored etcd member at {endpoint} did not answer: {type(exc).__name__}") from None
    return int(resp.json().get("count", 0)) > 0
