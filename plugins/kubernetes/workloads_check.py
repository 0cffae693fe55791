"""`workloads-ready`: the restored services serve. Objects read back prove nothing about a Deployment whose
pods cannot be scheduled (a lost toleration, a quota, a missing ServiceAccount): the check waits until every
restored Deployment is Available and every StatefulSet has all replicas ready, with each of their pods
Running on a Ready node, and otherwise says which is not and what its pods are waiting for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from drtool.durations import Duration, format_duration
from drtool.kube.client import KubeClient
from drtool.kube.readings import Obj, conditions, in_namespaces, is_true, items, ref, restored, wait_for
from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, NamespaceList, PlatformCheck, Verdict

KINDS = ("deployments", "statefulsets")


class WorkloadsReadyCheck(CheckSettings):
    """Restored Deployments and StatefulSets are Available, with their pods Running on Ready nodes."""

    type: Literal["workloads-ready"]
    namespaces: NamespaceList = Field(default_factory=list)  # empty: every namespace
    restored_only: bool = Field(default=True, alias="restored-only")  # only objects drtool's restore wrote
    timeout: Duration = dt.timedelta(minutes=5)

    def summary(self) -> str:
        where = f" in {', '.join(self.namespaces)}" if self.namespaces else ""
        which = "restored " if self.restored_only else ""
        return f"{which}Deployments and StatefulSets{where} serve, their pods Running on Ready nodes"


def _path(resource: str) -> Callable[[str | None], str]:
    return lambda ns: f"/apis/apps/v1/namespaces/{ns}/{resource}" if ns else f"/apis/apps/v1/{resource}"


def workloads(client: KubeClient, check: WorkloadsReadyCheck) -> list[Obj]:
    found = []
    for resource, kind in zip(KINDS, ("Deployment", "StatefulSet"), strict=True):
        for path in in_namespaces(check.namespaces, _path(resource)):
            found += [{**o, "kind": kind} for o in items(client, path) if restored(o) or not check.restored_only]
    return found


def selector(workload: Obj) -> str:
    """The workload's pod selector as a label-selector query."""
    match = workload["spec"].get("selector") or {}
    terms = [f"{k}={v}" for k, v in (match.get("matchLabels") or {}).items()]
    for e in match.get("matchExpressions") or []:
        values = ",".join(e.get("values") or [])
        terms.append(
            {"In": f"{e['key']} in ({values})", "NotIn": f"{e['key']} notin ({values})", "Exists": e["key"]}.get(
                e["operator"], f"!{e['key']}"
            )
        )
    return ",".join(terms)


def not_ready(client: KubeClient, workload: Obj, ready_nodes: set[str]) -> str | None:
    """Why ``workload`` does not serve yet, or None when it does."""
    spec, status = workload["spec"], workload.get("status") or {}
    want = int(spec.get("replicas", 1))
    if workload["kind"] == "Deployment":
        available = is_true(workload, "Available") and int(status.get("availableReplicas") or 0) >= want
        fresh = int(status.get("observedGeneration") or 0) >= int(workload["metadata"].get("generation") or 0)
        up = available and fresh and int(status.get("updatedReplicas") or 0) >= want
    else:
        up = int(status.get("readyReplicas") or 0) >= want and int(status.get("availableReplicas") or 0) >= want
    namespace = workload["metadata"]["namespace"]
    pods = list(items(client, f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector(workload)}))
    waiting = [p for p in pods if not _serving(p, ready_nodes)]
    if up and not waiting and len(pods) >= want:
        return None
    counts = f"{status.get('availableReplicas') or status.get('readyReplicas') or 0}/{want} ready"
    if waiting:
        return f"{ref(workload)} {counts}: {_pod_reason(waiting[0], ready_nodes)}"
    failure = conditions(workload).get("ReplicaFailure") or conditions(workload).get("Progressing") or {}
    return f"{ref(workload)} {counts}" + (f": {failure.get('message')}" if failure.get("message") else "")


def _serving(pod: Obj, ready_nodes: set[str]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and pod["spec"].get("nodeName") in ready_nodes


def _pod_reason(pod: Obj, ready_nodes: set[str]) -> str:
    name, phase = pod["metadata"]["name"], (pod.get("status") or {}).get("phase")
    node = pod["spec"].get("nodeName")
    if node and node not in ready_nodes:
        return f"pod {name} is on node {node}, which is not Ready"
    scheduled = conditions(pod).get("PodScheduled") or {}
    return f"pod {name} {phase}" + (f": {scheduled['message']}" if scheduled.get("message") else "")


def run(check: WorkloadsReadyCheck, ctx: CheckRun, watch: CheckWatch) -> Verdict:
    client = ctx.kube()
    scope = "restored " if check.restored_only else ""
    if not workloads(client, check):
        return Verdict(False, f"no {scope}Deployment or StatefulSet found on the target")

    def probe() -> tuple[list[Obj] | None, str]:
        nodes = items(client, "/api/v1/nodes")
        ready = {n["metadata"]["name"] for n in nodes if is_true(n, "Ready")}
        found = workloads(client, check)
        reasons = [r for r in (not_ready(client, w, ready) for w in found) if r]
        if not reasons:
            return found, ""
        return None, f"{len(reasons)} of {len(found)} not ready; " + "; ".join(reasons[:3])

    ready, why = wait_for(probe, check.timeout.total_seconds())
    if ready is None:
        return Verdict(False, f"not within {format_duration(check.timeout)}: {why}")
    watch.green()
    replicas = sum(int(w["spec"].get("replicas", 1)) for w in ready)
    facts = {"workloads": len(ready), "pods": replicas}
    took = format_duration(watch.clock() - watch.started_s)
    detail = f"{len(ready)} {scope}workloads serving, {replicas} pods Running on Ready nodes, in {took}"
    return Verdict(True, detail, facts)


CHECK = PlatformCheck("workloads-ready", WorkloadsReadyCheck, run, reads_cluster=True)
