"""`kueue-admits`: the restored queues admit work. A restore can bring every Kueue object back and still
leave a ClusterQueue inactive (a flavor, cohort or admission check it names is missing) so that no job is
ever admitted; only Kueue itself can say. The check submits what a team would: a small suspended batch
Job labelled with the LocalQueue, and passes when the real Kueue admits its Workload onto the expected
ResourceFlavor (and, with ``running``, its pod runs on a node: the first queued workload served). On
failure it names the ClusterQueue and Kueue's own reason. The probe Job is deleted either way.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from typing import Any, Literal

from pydantic import Field

from drtool.durations import Duration, format_duration
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.readings import PROBE_MANAGER, Obj, conditions, items, wait_for
from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, PlatformCheck, Verdict

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PROBE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled on kwok nodes; tiny where it is


class KueueAdmitsCheck(CheckSettings):
    """A small suspended Job submitted to a restored LocalQueue is admitted onto ``flavor`` (and runs)."""

    type: Literal["kueue-admits"]
    namespace: str
    queue: str  # the LocalQueue
    flavor: str | None = None  # the ResourceFlavor expected for ``resource``; None: any
    resource: str = "nvidia.com/gpu"  # whose flavor assignment is compared
    requests: dict[str, str] = Field(default_factory=lambda: {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"})
    running: bool = True  # also wait for the probe's pod to run on a node: the first queued workload served
    timeout: Duration = dt.timedelta(minutes=2)

    def summary(self) -> str:
        onto = f" onto flavor {self.flavor}" if self.flavor else ""
        runs = " and its pod runs" if self.running else ""
        return f"a probe Job on LocalQueue {self.namespace}/{self.queue} is admitted by Kueue{onto}{runs}"


def probe_job(name: str, check: KueueAdmitsCheck) -> Obj:
    """A one-pod Job asking for ``requests`` (extended resources such as GPUs as limits too), suspended."""
    extended = {k: v for k, v in check.requests.items() if "/" in k}
    resources = {"requests": dict(check.requests), **({"limits": extended} if extended else {})}
    container = {"name": "probe", "image": PROBE_IMAGE, "resources": resources}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: check.queue, "app.kubernetes.io/managed-by": "drtool"}},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def run(check: KueueAdmitsCheck, ctx: CheckRun, watch: CheckWatch) -> Verdict:
    client = ctx.kube()
    try:
        local = client.get(f"{KUEUE}/namespaces/{check.namespace}/localqueues/{check.queue}")
    except ApiError as exc:
        if exc.status != 404:
            raise
        return Verdict(False, f"LocalQueue {check.namespace}/{check.queue} not found on the target")
    cluster_queue = str((local.get("spec") or {}).get("clusterQueue"))
    name = f"drtool-probe-{secrets.token_hex(3)}"
    jobs = f"/apis/batch/v1/namespaces/{check.namespace}/jobs"
    body = json.dumps(probe_job(name, check)).encode()
    try:
        client.request("POST", jobs, params={"fieldManager": PROBE_MANAGER}, body=body, ok=(201,))
    except ApiError as exc:  # e.g. Kueue's webhook unreachable: every Job with a queue is refused
        return Verdict(False, f"the API server refused the probe Job: {exc.message}")
    facts: dict[str, Any] = {"job": f"{check.namespace}/{name}", "cluster_queue": cluster_queue}
    try:
        return _judge(client, check, cluster_queue, name, watch, facts)
    finally:
        client.request("DELETE", f"{jobs}/{name}", params={"propagationPolicy": "Background"}, ok=(200, 202, 404))


def _judge(
    client: KubeClient,
    check: KueueAdmitsCheck,
    cluster_queue: str,
    name: str,
    watch: CheckWatch,
    facts: dict[str, Any],
) -> Verdict:
    deadline = watch.started_s + check.timeout.total_seconds()
    workload, why = wait_for(lambda: _admitted(client, check.namespace, name, cluster_queue), _left(watch, deadline))
    if workload is None:
        return Verdict(False, f"Job {name} not admitted within {format_duration(check.timeout)}: {why}", facts)
    admission = workload["status"]["admission"]
    flavors = (admission.get("podSetAssignments") or [{}])[0].get("flavors") or {}
    flavor = flavors.get(check.resource)
    facts |= {"admitted_s": round(watch.clock() - watch.started_s, 3), "flavor": flavor}
    admitted_by = f"admitted by ClusterQueue {admission.get('clusterQueue')} onto {flavor}"
    if check.flavor and flavor != check.flavor:
        return Verdict(False, f"Job {name} {admitted_by}, not onto {check.flavor} ({check.resource})", facts)
    if check.running:
        node, why = wait_for(lambda: _pod_on_node(client, check.namespace, name), _left(watch, deadline))
        if node is None:
            return Verdict(False, f"Job {name} {admitted_by}, but its pod did not run: {why}", facts)
        facts |= {"running_s": round(watch.clock() - watch.started_s, 3), "node": node}
        admitted_by += f"; its pod ran on node {node}"
    watch.green()
    return Verdict(True, f"Job {name} {admitted_by} in {format_duration(watch.clock() - watch.started_s)}", facts)


def _left(watch: CheckWatch, deadline: float) -> float:
    return max(0.0, deadline - watch.clock())


def _admitted(client: KubeClient, namespace: str, job: str, cluster_queue: str) -> tuple[Obj | None, str]:
    """The probe's Workload once admitted; else Kueue's reason, the ClusterQueue's first."""
    owned = [
        w
        for w in items(client, f"{KUEUE}/namespaces/{namespace}/workloads")
        if any(o.get("kind") == "Job" and o.get("name") == job for o in w["metadata"].get("ownerReferences") or [])
    ]
    if owned and (owned[0].get("status") or {}).get("admission"):
        return owned[0], ""
    reasons = [_queue_state(client, cluster_queue)]
    if not owned:
        reasons.append("Kueue made no Workload for it (is Kueue running on the target?)")
    else:
        reserved = conditions(owned[0]).get("QuotaReserved") or conditions(owned[0]).get("Admitted")
        if reserved:
            reasons.append(f"Workload {reserved['type']}={reserved['status']}: {reserved.get('message', '')}")
    return None, "; ".join(r for r in reasons if r)


def _queue_state(client: KubeClient, name: str) -> str:
    try:
        queue = client.get(f"{KUEUE}/clusterqueues/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return f"ClusterQueue {name} not found"
        raise
    active = conditions(queue).get("Active")
    if active is None:
        return f"ClusterQueue {name} has no Active condition yet"
    if active.get("status") != "True":
        return f"ClusterQueue {name} is inactive: {active.get('reason')}: {active.get('message', '')}"
    return ""


def _pod_on_node(client: KubeClient, namespace: str, job: str) -> tuple[str | None, str]:
    mine = list(items(client, f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": f"job-name={job}"}))
    for pod in mine:
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded") and pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"], ""
    if not mine:
        return None, "no pod yet"
    scheduled = conditions(mine[0]).get("PodScheduled") or {}
    return None, f"pod {mine[0]['metadata']['name']} {mine[0].get('status', {}).get('phase')}: " + (
        scheduled.get("message") or "not scheduled"
    )


CHECK = PlatformCheck("kueue-admits", KueueAdmitsCheck, run, reads_cluster=True)
