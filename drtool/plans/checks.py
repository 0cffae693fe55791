"""A plan's own post-restore checks (kube-object, http, tcp), run after every step: did the platform come back?

They read the restored system through its own API, like the plugins' verify, but say what the operator
cares about ("the a100 flavor exists", "the model server answers") rather than what a plugin copied.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import requests

from drtool.plans.schema import HttpCheck, KubeObjectCheck, Plan, PlanCheck, TcpCheck
from drtool.plans.steps import step_target
from drtool.plugin.contract import Check

TIMEOUT_S = 10


def run_checks(plan: Plan, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> list[Check]:
    """Every check of ``plan``; a check that cannot run fails with the reason (it never raises)."""
    return [_run(check, cluster_access(plan, overrides or {})) for check in plan.checks]


def cluster_access(plan: Plan, overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The target cluster for kube-object checks: the kubernetes plugin's target, else any step's kubeconfig."""
    preferred = {**(plan.target.get("kubernetes") or {}), **(overrides.get("kubernetes") or {})}
    if preferred.get("kubeconfig"):
        return preferred
    for step in plan.steps:
        target = step_target(plan, step, overrides)
        if target.get("kubeconfig"):
            return target
    return {}


def _run(check: PlanCheck, kube: Mapping[str, Any]) -> Check:
    try:
        if isinstance(check, TcpCheck):
            return _tcp(check)
        if isinstance(check, HttpCheck):
            return _http(check)
        return _kube_object(check, kube)
    except Exception as exc:  # a check that cannot run is a failed check, with why
        return Check(check.id, False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def _tcp(check: TcpCheck) -> Check:
    host, _, port = check.address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S):
        return Check(check.id, True, f"{check.address} accepts connections")


def _http(check: HttpCheck) -> Check:
    status = requests.get(check.url, timeout=TIMEOUT_S).status_code
    return Check(check.id, status == check.status, f"GET {check.url}: {status} (want {check.status})")


def _kube_object(check: KubeObjectCheck, kube: Mapping[str, Any]) -> Check:
    from kubernetes import config, dynamic  # slow to import; only plans with kube-object checks pay
    from kubernetes.dynamic.exceptions import NotFoundError

    if not kube.get("kubeconfig"):
        return Check(check.id, False, "no kubeconfig: the plan's target has no `kubernetes.kubeconfig`")
    client = dynamic.DynamicClient(
        config.new_client_from_config(config_file=str(kube["kubeconfig"]), context=kube.get("context"))
    )
    what = f"{check.kind} {check.namespace + '/' if check.namespace else ''}{check.name}"
    try:
        resource = client.resources.get(api_version=check.api_version, kind=check.kind)
        obj = resource.get(name=check.name, namespace=check.namespace).to_dict()
    except NotFoundError:
        return Check(check.id, False, f"{what} not found")
    if check.field is None:
        return Check(check.id, True, f"{what} exists")
    value: Any = obj
    for part in check.field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if check.equals is None:
        return Check(check.id, value is not None, f"{what} {check.field} = {value!r}")
    return Check(check.id, value == check.equals, f"{what} {check.field} = {value!r} (want {check.equals!r})")


CLUSTER_OBJECTS_PLUGIN = "kubernetes"  # the plugin whose steps restore the objects cluster checks read


def checks_left_out(plan: Plan, left_out: Mapping[str, str]) -> dict[str, str]:
    """Check id -> why it is not run: a check that reads the target cluster (every type but http and tcp) when
    each step restoring the cluster's objects was left out (``left_out``: plugin -> why), so the demo on a
    machine without a Kubernetes lab does not fail on what it chose to leave out."""
    cluster_steps = [s for s in plan.steps if s.uses == CLUSTER_OBJECTS_PLUGIN]
    if not cluster_steps or any(s.uses not in left_out for s in cluster_steps):
        return {}
    why = f"it reads the cluster step {cluster_steps[0].id} restores, left out: {left_out[CLUSTER_OBJECTS_PLUGIN]}"
    return {c.id: why for c in plan.checks if not isinstance(c, HttpCheck | TcpCheck)}
