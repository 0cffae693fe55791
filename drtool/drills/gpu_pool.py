"""Scenario ``gpu-pool-lost``: a GPU node pool is gone (a zone outage, a node pool deleted by mistake). No
backup brings nodes back, so nothing is restored: the drill proves the platform keeps admitting work on the
flavor that remains, and measures the time from the loss to the first job admitted and running there.

Kueue admits by quota, not by nodes: after the pool's nodes are gone it still admits onto the lost flavor
and the pods never schedule (Kueue 0.17 moves work off a flavor only for topology-aware flavors, onto
nodes of the same flavor). So the drill does what the platform's runbook does, and records it as the
person's action: the lost flavor's quota is drained (nominal quota 0) in every ClusterQueue that owns it,
and Kueue then places the team's next job on its next flavor, borrowing through the cohort.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Mapping
from typing import Any

from drtool.catalog.db import Catalog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.errors import UsageError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.readings import Obj, items
from drtool.kube.settings import Connection
from drtool.plans.executor import new_run_id
from drtool.plans.platform.context import Watch
from drtool.plugin.checks import PlatformCheck, Verdict, contributed
from drtool.plugin.manager import load_plugins

from . import guard
from .run import _stamp, _wait

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
CONFLICT_RETRIES = 5  # re-reads of a ClusterQueue another writer changed between our read and our write


@dataclasses.dataclass
class GpuPoolLost:
    lost: str  # the ResourceFlavor whose node pool is lost
    remaining: str  # the flavor the team's work must be admitted on instead
    namespace: str  # a team that owns quota of ``lost`` ...
    queue: str  # ... and its LocalQueue, where the probe job is submitted
    scenario: str = "gpu-pool-lost"
    manual: list[str] = dataclasses.field(default_factory=list)
    nodes: list[Obj] = dataclasses.field(default_factory=list)  # the pool as it was (a lab may put it back)
    queues: dict[str, Obj] = dataclasses.field(default_factory=dict)  # ClusterQueue specs before the drain

    def _selector(self, client: KubeClient) -> str:
        flavor = client.get(f"{KUEUE}/resourceflavors/{self.lost}")
        labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

    def _pool(self, client: KubeClient) -> list[Obj]:
        return list(items(client, "/api/v1/nodes", {"labelSelector": self._selector(client)}))

    def inject(self, client: KubeClient) -> None:
        self.nodes = self._pool(client)
        if not self.nodes:
            raise UsageError(f"flavor {self.lost} has no nodes: no pool to lose", "name a flavor whose nodes exist")
        for node in self.nodes:
            client.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}", ok=(200, 202, 404))

    def detected(self, client: KubeClient) -> bool:
        """No node of the pool is left."""
        return not self._pool(client)

    def pending(self, client: KubeClient) -> str:
        return "still there: " + ", ".join(n["metadata"]["name"] for n in self._pool(client))

    def drain(self, client: KubeClient) -> list[str]:
        """The runbook's step: the lost flavor's quota to 0 (no lending) in every ClusterQueue that owns it."""
        drained = [q["metadata"]["name"] for q in items(client, f"{KUEUE}/clusterqueues") if self._drain(client, q)]
        self.manual.append(f"drained flavor {self.lost}'s quota in ClusterQueue(s) {', '.join(drained) or 'none'}")
        return drained

    def _drain(self, client: KubeClient, queue: Obj) -> bool:
        """Drain ``queue`` if it owns quota of the lost flavor. The write is a replace at the version read, and
        Kueue writes the queue's status meanwhile (its usage moves as the pool's pods go), which moves that
        version: on a conflict the queue is read again and the drain retried, as client-go's RetryOnConflict
        does (a suite run: `drtool drill gpu-pool-lost` failed on ``409 Conflict`` for cq-speech)."""
        name, conflicts = queue["metadata"]["name"], 0
        while True:
            before = json.loads(json.dumps(queue["spec"]))
            owned = [
                r
                for group in queue["spec"].get("resourceGroups") or []
                for flavor in group.get("flavors") or []
                if flavor["name"] == self.lost
                for r in flavor.get("resources") or []
                if str(r.get("nominalQuota")) != "0"
            ]
            if not owned:
                return False
            for resource in owned:
                resource["nominalQuota"] = 0
                resource.pop("lendingLimit", None)
            body = json.dumps({"apiVersion": queue["apiVersion"], "kind": queue["kind"], "metadata": queue["metadata"],
                               "spec": queue["spec"]}).encode()  # fmt: skip
            try:
                client.request("PUT", f"{KUEUE}/clusterqueues/{name}", body=body, ok=(200,))
            except ApiError as exc:
                conflicts += 1
                if exc.status != 409 or conflicts > CONFLICT_RETRIES:
                    raise
                queue = client.get(f"{KUEUE}/clusterqueues/{name}")
                continue
            self.queues[name] = before
            return True


@dataclasses.dataclass
class ProbeRun:
    """What the kueue-admits check runs with here: the drilled cluster, no plan and no backup."""

    client: KubeClient
    manifest: Any = None
    plan: Any = None

    @property
    def restore_started(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def target(self, step_id: str) -> dict[str, Any]:
        return {}

    def cluster(self) -> dict[str, Any]:
        return {}

    def kube(self) -> KubeClient:
        return self.client


def admits(
    client: KubeClient, check_id: str, namespace: str, queue: str, flavor: str, timeout: dt.timedelta
) -> Verdict:
    """The kueue plugin's ``kueue-admits`` check, run here: a probe Job on ``namespace/queue`` is admitted
    onto ``flavor`` by Kueue and its pod runs on a node."""
    found: PlatformCheck | None = contributed(load_plugins()).get("kueue-admits")
    if found is None:
        raise UsageError("gpu-pool-lost needs the kueue plugin's kueue-admits check", "install drtool's kueue plugin")
    settings = {"type": "kueue-admits", "id": check_id, "namespace": namespace, "queue": queue, "flavor": flavor}
    check = found.settings.model_validate(settings | {"timeout": timeout})
    return found.run(check, ProbeRun(client), Watch(time.monotonic))


def drill_gpu_pool_lost(
    injector: GpuPoolLost,
    target: Mapping[str, Any],
    catalog: Catalog,
    *,
    named: str | None = None,
    approved: bool = False,
    detect_timeout: float = 120.0,
    admit_timeout: dt.timedelta = dt.timedelta(minutes=5),
) -> ScenarioDrillRow:
    """Lose the pool, drain its quota, and time a probe job until Kueue admits it on the remaining flavor
    and its pod runs on a node there. RPO is 0: nothing stored was lost, only capacity."""
    client = KubeClient(Connection.from_mapping(target))
    host = guard.allow(client.server, named, approved)
    injector.inject(client)
    injected = time.time()
    detected = _wait(
        lambda: injector.detected(client), "the pool's loss", detect_timeout, lambda: injector.pending(client)
    )
    drained = injector.drain(client)
    recovered = time.time()
    check_id = "admitted-elsewhere"
    verdict = admits(client, check_id, injector.namespace, injector.queue, injector.remaining, admit_timeout)
    in_service = time.time() if verdict.ok else None
    row = ScenarioDrillRow(
        id=new_run_id(),
        scenario=injector.scenario,
        plan_name="none: Kueue admits on the remaining flavor",
        target=host,
        ok=verdict.ok,
        injected_at=_stamp(injected),
        detected_at=_stamp(detected),
        recovered_at=_stamp(recovered),
        in_service_at=_stamp(in_service) if in_service else None,
        rpo_s=0.0,
        time_to_service_s=round(in_service - injected, 3) if in_service else None,
        steps=json.dumps(
            [{"id": "drain-quota", "status": "ok", "seconds": round(recovered - detected, 3), "queues": drained}]
        ),
        checks=json.dumps([{"name": check_id, "ok": verdict.ok, "detail": verdict.detail, **dict(verdict.facts)}]),
        manual=json.dumps(injector.manual),
        error="" if verdict.ok else verdict.detail,
    )
    ScenarioLog(catalog).save(row)
    return row
