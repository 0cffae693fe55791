"""One drill: guard, inject, wait until the failure shows, recover with the plan, judge, record.

Times are the drill's own: ``injected`` when the injector's last write returned, ``detected`` when the
cluster first shows the failure, ``recovered`` when the plan's last step ended, ``in service`` when its
checks ended green. RPO is what the backup could not hold: the time from the backup's finish to the
injection (everything written in between is lost). Where a ``training-resumes`` check resumed a run, RPO is
also counted in training: the steps lost (``rpo_steps``), and in time from when the checkpoint resumed from
was written, if that is earlier than the backup's finish.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from drtool.catalog.db import Catalog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.errors import SourceError
from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from drtool.plans.executor import Executor, new_run_id
from drtool.plans.loader import LoadedPlan
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository

from . import guard


class Injector(Protocol):
    scenario: str
    manual: list[str]  # what a person had to do in this scenario, in words

    def inject(self, client: KubeClient) -> None: ...

    def detected(self, client: KubeClient) -> bool: ...

    def pending(self, client: KubeClient) -> str:
        """What still stands between the injection and its failure showing (for the error when it never does)."""
        ...


@dataclasses.dataclass(frozen=True)
class Judged:
    """One of a scenario's own checks, beside the plan's: what only the scenario knows to look at."""

    name: str
    ok: bool
    detail: str


@runtime_checkable
class Judging(Protocol):
    def judge(self, client: KubeClient) -> list[Judged]:
        """After the plan ran: the scenario's own verdicts (e.g. every workload's image pulls by digest)."""
        ...


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _wait(ready: Callable[[], bool], what: str, timeout: float, pending: Callable[[], str]) -> float:
    deadline = time.time() + timeout
    while not ready():
        if time.time() > deadline:
            raise SourceError(f"drill: {what} not seen within {timeout:.0f}s: {pending()}")
        time.sleep(0.25)
    return time.time()


def _training_lost(checks: Sequence[Any]) -> tuple[int | None, float | None]:
    """Steps lost and when the checkpoint resumed from was written (epoch s), from a ``training-resumes``
    check's facts; (None, None) when no check resumed a training run."""
    for check in checks:
        facts: Mapping[str, Any] = getattr(check, "facts", {}) or {}
        if "steps_lost_at_least" in facts:
            written = facts.get("checkpoint_written_at")
            at = dt.datetime.fromisoformat(str(written).replace("Z", "+00:00")).timestamp() if written else None
            return int(facts["steps_lost_at_least"]), at
    return None, None


def allowed_target(target: Mapping[str, Any], named: str | None, approved: bool) -> str:
    """The host of the cluster ``target`` names, if a drill may break it (``guard``); nothing is contacted."""
    return guard.allow(KubeClient(Connection.from_mapping(target)).server, named, approved)


def run_drill(
    injector: Injector,
    target: Mapping[str, Any],
    loaded: LoadedPlan,
    repo: Repository,
    manifest: Manifest,
    catalog: Catalog,
    *,
    named: str | None = None,
    approved: bool = False,
    detect_timeout: float = 120.0,
    step_targets: Mapping[str, Mapping[str, Any]] | None = None,
    recovery_point: float | None = None,
) -> ScenarioDrillRow:
    """Break ``target`` (a kubeconfig mapping: ``kubeconfig``, ``context``) as the scenario says and recover it
    with the plan, whose every step is pointed at that same cluster, or, for a plugin in ``step_targets``
    (one that restores no cluster: a registry), at the target given there. ``recovery_point``: the time a
    point-in-time plan restores (RPO counts from it, not from the backup's finish)."""
    client = KubeClient(Connection.from_mapping(target))
    host = guard.allow(client.server, named, approved)  # again: a library caller may not have asked
    overrides = {step.uses: dict((step_targets or {}).get(step.uses, target)) for step in loaded.require().steps}
    injector.inject(client)
    injected = time.time()
    detected = _wait(
        lambda: injector.detected(client),
        f"{injector.scenario}'s failure",
        detect_timeout,
        lambda: injector.pending(client),
    )
    started = time.time()
    run = Executor(loaded, repo, manifest, overrides=overrides, catalog=catalog, kind="drill").execute()
    steps = list(run.steps.values())
    recovered = started + max((s.finished_s for s in steps), default=0.0)
    judged = injector.judge(client) if run.ok and isinstance(injector, Judging) else []
    ok = run.ok and all(j.ok for j in judged)
    in_service = (time.time() if judged else started + run.seconds) if ok else None
    backup_done = dt.datetime.fromisoformat(manifest.finished.replace("Z", "+00:00")).timestamp()
    steps_lost, checkpoint_at = _training_lost(run.checks)
    kept_until = min(backup_done, checkpoint_at or backup_done)
    row = ScenarioDrillRow(
        id=new_run_id(),
        scenario=injector.scenario,
        plan_name=run.plan.name,
        target=host,
        ok=ok,
        injected_at=_stamp(injected),
        detected_at=_stamp(detected),
        recovered_at=_stamp(recovered) if all(s.status in ("ok", "skipped") for s in steps) else None,
        in_service_at=_stamp(in_service) if in_service else None,
        rpo_s=round(max(0.0, injected - (kept_until if recovery_point is None else recovery_point)), 3),
        rpo_steps=steps_lost,
        time_to_service_s=round(in_service - injected, 3) if in_service else None,
        steps=json.dumps(
            [{"id": s.id, "status": s.status, "seconds": round(s.finished_s - s.started_s, 3)} for s in steps]
        ),
        checks=json.dumps(
            [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "facts": getattr(c, "facts", {})}
                for c in [*(c for s in run.failed for c in s.checks if not c.ok), *run.checks, *judged]
            ],
            default=str,
        ),
        manual=json.dumps(injector.manual),
        error="; ".join(
            [f"{s.id}: {s.error}" for s in run.failed] + [f"{j.name}: {j.detail}" for j in judged if not j.ok]
        ),
    )
    ScenarioLog(catalog).save(row)
    return row
