"""A plan's own post-restore checks, run after every step: did the platform come back?

They read the restored system through its own API, like the plugins' verify, but say what the operator
cares about ("the a100 flavor exists", "the model server answers"). Three are drtool's own readings
(kube-object, http, tcp); every other type is contributed by a plugin (drtool.plugin.checks): the platform
checks, which wait for the restored platform's own controllers to act on what was restored (Kueue admitting
work, Deployments becoming Available, cert-manager not re-issuing, the garbage collector leaving restored
objects alone, a training run resuming at the right step), come from the built-in plugins so. All run at
once (they mostly wait), each timed on the run's clock so a report can say when service was back.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from pydantic import ValidationError

from drtool.errors import DrtoolError, UsageError
from drtool.plans.platform.context import CheckContext, TimedCheck, Watch, cluster_plugins
from drtool.plans.schema import ContributedCheck, HttpCheck, KubeObjectCheck, Plan, PlanCheck, TcpCheck
from drtool.plans.steps import why_not_run
from drtool.plugin.checks import Verdict, contributed
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest

TIMEOUT_S = 10
Runner = Callable[[Any, CheckContext, Watch], Verdict]


def run_checks(
    plan: Plan,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    manifest: Manifest | None = None,
    *,
    clock: Callable[[], float] | None = None,
) -> list[TimedCheck]:
    """Every check of ``plan``, at once; a check that cannot run fails with the reason (it never raises).

    ``clock`` is the run's (seconds since it started): each result's times are on it.
    """
    start = time.monotonic()
    context = CheckContext(plan, overrides or {}, manifest, clock or (lambda: time.monotonic() - start))
    if not plan.checks:
        return []
    with ThreadPoolExecutor(len(plan.checks), thread_name_prefix="check") as pool:
        return list(pool.map(lambda check: _timed(check, context), plan.checks))


def skipped_because(check: PlanCheck, context: CheckContext) -> str | None:
    """Why a check about one step's restore (its ``step`` key) does not run: that optional step did not run
    (not in the backup)."""
    step_id = check.step if isinstance(check, ContributedCheck) else None
    if step_id is None or context.manifest is None:
        return None
    step = context.plan.step(step_id)
    reason = why_not_run(step, context.manifest, load_plugins())
    return f"skipped: step {step_id} did not run ({reason})" if reason and step.optional else None


def _timed(check: PlanCheck, context: CheckContext) -> TimedCheck:
    watch = Watch(context.clock)
    skipped = skipped_because(check, context)
    if skipped:
        return TimedCheck(check.id, True, skipped, watch.started_s, None, watch.started_s, {"skipped": True})
    try:
        verdict = _runner(check)(check, context, watch)
    except DrtoolError as exc:
        verdict = Verdict(False, exc.one_line())
    except Exception as exc:  # a check that cannot run is a failed check, with why
        verdict = Verdict(False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    if verdict.ok:
        watch.green()
    return TimedCheck(
        check.id, verdict.ok, verdict.detail, watch.started_s, watch.green_s if verdict.ok else None,
        context.clock(), dict(verdict.facts),
    )  # fmt: skip


def _tcp(check: TcpCheck, _context: CheckContext, _watch: Watch) -> Verdict:
    host, _, port = check.address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S):
        return Verdict(True, f"{check.address} accepts connections")


def _http(check: HttpCheck, _context: CheckContext, _watch: Watch) -> Verdict:
    status = requests.get(check.url, timeout=TIMEOUT_S).status_code
    return Verdict(status == check.status, f"GET {check.url}: {status} (want {check.status})")


def _kube_object(check: KubeObjectCheck, context: CheckContext, _watch: Watch) -> Verdict:
    from kubernetes import config, dynamic  # slow to import; only plans with kube-object checks pay
    from kubernetes.dynamic.exceptions import NotFoundError

    kube = context.cluster()
    if not kube.get("kubeconfig"):
        return Verdict(False, "no kubeconfig: no target of the plan names the restored cluster (`kubeconfig`)")
    client = dynamic.DynamicClient(
        config.new_client_from_config(config_file=str(kube["kubeconfig"]), context=kube.get("context"))
    )
    what = f"{check.kind} {check.namespace + '/' if check.namespace else ''}{check.name}"
    try:
        resource = client.resources.get(api_version=check.api_version, kind=check.kind)
        obj = resource.get(name=check.name, namespace=check.namespace).to_dict()
    except NotFoundError:
        return Verdict(False, f"{what} not found")
    if check.field is None:
        return Verdict(True, f"{what} exists")
    value: Any = obj
    for part in check.field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if check.equals is None:
        return Verdict(value is not None, f"{what} {check.field} = {value!r}")
    return Verdict(value == check.equals, f"{what} {check.field} = {value!r} (want {check.equals!r})")


def _runner(check: PlanCheck) -> Runner:
    """A built-in check's runner; a contributed one's parses the entry with its plugin's model first."""
    if not isinstance(check, ContributedCheck):
        return RUNNERS[type(check)]
    contribution = contributed(load_plugins()).get(check.type)
    if contribution is None:
        raise UsageError(f"no installed plugin contributes check type {check.type!r}", "see `drtool plugins`")
    return lambda entry, context, watch: contribution.run(
        contribution.settings.model_validate(entry.settings()), context, watch
    )


def summary_of(check: PlanCheck) -> str:
    """What ``check`` proves, in one line (a contributed check's own ``summary``, once its plugin parses it)."""
    contribution = contributed(load_plugins()).get(check.type) if isinstance(check, ContributedCheck) else None
    if isinstance(check, ContributedCheck) and contribution is not None:
        with contextlib.suppress(ValidationError):
            return contribution.settings.model_validate(check.settings()).summary()
    return check.summary()


RUNNERS: dict[type, Runner] = {
    TcpCheck: _tcp,
    HttpCheck: _http,
    KubeObjectCheck: _kube_object,
}


def reads_cluster(check: PlanCheck, plugins: Mapping[str, Any]) -> bool:
    """Whether ``check`` reads the restored cluster: kube-object, and a contributed type that says so (every
    platform check)."""
    if isinstance(check, ContributedCheck):
        contribution = contributed(plugins).get(check.type)
        return contribution is not None and contribution.reads_cluster
    return not isinstance(check, HttpCheck | TcpCheck)


def checks_left_out(plan: Plan, left_out: Mapping[str, str]) -> dict[str, str]:
    """Check id -> why it is not run: a check that reads the target cluster when each step restoring the
    cluster's objects (a plugin with ``restores_cluster``) was left out (``left_out``: plugin -> why), so the
    demo on a machine without a Kubernetes lab does not fail on what it chose to leave out."""
    plugins = load_plugins()
    cluster = set(cluster_plugins(plugins))
    cluster_steps = [s for s in plan.steps if s.uses in cluster]
    if not cluster_steps or any(s.uses not in left_out for s in cluster_steps):
        return {}
    first = cluster_steps[0]
    why = f"it reads the cluster step {first.id} restores, left out: {left_out[first.uses]}"
    return {c.id: why for c in plan.checks if reads_cluster(c, plugins)}
