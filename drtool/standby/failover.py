"""`drtool failover` and `drtool failback`: hand service to the standby, measured (docs/standby.md).

Order, and why:
1. Probe the primary's API servers (recorded by the set's backups as ``kubernetes_api_endpoints``): if
   one still accepts connections the failover is refused unless forced, since two live primaries would
   both serve and write.
2. Fence the set in the store (drtool/repo/fences.py, owner key only): the old primary's backups and
   followers publish nothing more, and the standby ignores any link the store receives after the fence.
3. Catch up: one standby round applies every link stored before the fence (the last link).
4. Release what hydration held (each plugin's ``release``, in the set's plugin order: objects before the
   queues that admit work onto them); deferred deletions stay held for a person to judge.
   Meanwhile (a thread: it does not wait for the release) the plan's steps of plugins the standby does not
   hydrate (checkpoints, model registry) are restored from the newest backup received before the fence
   (drtool/standby/steps.py); a training run's resume step gives the RPO in training steps.
5. The plan's checks, platform checks included (drtool/plans/checks.py), against the standby as target,
   once those steps ended.
6. DNS: a ``dns-certs`` step of the plan (restored like the other steps of step 4, with its ``cutover``
   option re-pointing the old load balancers' records at the standby's) cuts the service names over; without
   one the failover lists DNS as left for the operator.
RPO is the failure time minus the source time of the newest change applied; RTO is command start to the
moment the last check went green (or the release and the plan's steps ended, without checks).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from drtool.errors import PrimaryReachable, UsageError
from drtool.plans.checks import run_checks
from drtool.plans.schema import Plan
from drtool.probe import reachable
from drtool.repo.fences import lift_fence, write_fence
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.standby.hydrate import Round, Standby
from drtool.standby.links import iso, parse_iso
from drtool.standby.steps import StepsDone, dns_cut_over, run_plan_steps

ENDPOINT_FACT = "kubernetes_api_endpoints"
PROBE_TIMEOUT_S = 3.0


@dataclasses.dataclass
class FailoverResult:
    backup_set: str
    started: str
    failed_at: str
    forced: bool
    primary: list[str]
    reachable: list[str]
    fence_written: str
    caught_up: list[str]  # links applied by the final round
    released: dict[str, int]
    still_deferred: int
    steps: list[dict[str, Any]]  # the plan's steps of plugins the standby does not hydrate (steps.py)
    checks: list[dict[str, Any]]
    resume_steps: dict[str, int]  # training run -> the step of the checkpoint it resumes from
    last_change: str | None  # source time of the newest change applied
    rpo_s: float | None
    rto_s: float
    left: list[str]  # what the operator still has to do

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in [*self.steps, *self.checks])

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["ok"] = self.ok
        return out


def primary_endpoints(repo: Repository, backup_set: str, plugins: Sequence[str]) -> list[str]:
    """The API servers the set's newest backup that names any recorded (its failure domain)."""
    ids = repo.backup_ids()
    for manifest in repo.manifests_newest_first(ids):
        if manifest.backup_set != backup_set or not manifest.trusted:
            continue
        found = manifest.failure_domain.get(ENDPOINT_FACT) or []
        if found and any(p in manifest.plugins for p in plugins):
            return [str(e) for e in found]
    return []


def failover(
    repo: Repository,
    standby: Standby,
    *,
    plan: Plan | None = None,
    force: bool = False,
    failed_at: dt.datetime | None = None,
    primary: Sequence[str] = (),
    reason: str = "failover",
    planned: bool = False,
    drain_s: float = 10.0,
    on_event: Callable[[str], None] = lambda line: None,
) -> FailoverResult:
    """Run the failover of ``standby``'s set; see the module's docstring for the order."""
    clock0 = time.monotonic()
    started = dt.datetime.now(dt.UTC)
    backup_set = standby.backup_set
    endpoints = list(primary) or primary_endpoints(repo, backup_set, list(standby.plugins))
    alive = [e for e in endpoints if reachable(e, PROBE_TIMEOUT_S)]
    if not endpoints and not force:
        raise UsageError(
            f"no backup of set {backup_set} records its primary's API server, so drtool cannot tell whether it is down",
            "name it with --primary URL, or pass --force once you know it is down",
        )
    if planned:
        _drain(standby, drain_s, on_event)
    elif alive and not force:
        raise PrimaryReachable(
            f"the primary of set {backup_set} is still reachable ({', '.join(alive)}): failover refused",
            "stop it first, or pass --force to fence it and fail over anyway (docs/standby.md)",
        )
    fence = write_fence(repo, backup_set, reason, tuple(endpoints))
    on_event(f"fenced set {backup_set} at {fence.written}: its old primary publishes nothing more")
    overrides = {name: standby.target for name in standby.plugins}
    restored, restoring = StepsDone(), None
    if plan is not None:  # alongside the last round and the release: they do not wait for each other
        restoring = threading.Thread(
            target=restored.collect,
            args=(partial(run_plan_steps, repo, plan, backup_set, standby.plugins, overrides, fence.stored),),
            kwargs={"clock": lambda: time.monotonic() - clock0, "on_event": on_event},
            name="failover-steps",
            daemon=True,
        )
        restoring.start()
    final: Round = standby.round()
    on_event(f"caught up: {len(final.applied)} last link(s) applied")
    released: dict[str, int] = {}
    for name, plugin in standby.plugins.items():
        result = plugin.release(standby.target, standby.state_of(name))
        standby.record.plugins[name] = result.state.to_json()
        released[name] = result.released
        on_event(f"{name}: released {result.released} held object(s)")
    standby.store.save(standby.record)
    if restoring is not None:
        restoring.join()
    done_s = time.monotonic() - clock0
    checks = _checks(plan, overrides, restored.manifest, clock0) if plan is not None else []
    if checks:  # service is back when the last check first held (a failed one: when it gave up)
        done_s = max(c["green_s"] if c["green_s"] is not None else c["finished_s"] for c in checks)
    last_change = _last_change(standby)
    failure = failed_at or started
    rpo = (failure - last_change).total_seconds() if last_change else None
    deferred = final.deferred
    left = []
    if deferred:
        left.append(
            f"{deferred} deletion(s) seen on the old primary are still held: judge them, then "
            f"`drtool standby --set {backup_set} --target ... --delete-after 0 --once`"
        )
    if not dns_cut_over(restored.results):
        left.append(
            "DNS: point the service names at the standby (a `dns-certs` step with `cutover: OLD=NEW` in the "
            "failover plan does it; docs/standby.md)"
        )
    result = FailoverResult(
        backup_set=backup_set,
        started=iso(started),
        failed_at=iso(failure),
        forced=force,
        primary=endpoints,
        reachable=alive,
        fence_written=fence.written,
        caught_up=final.applied,
        released=released,
        still_deferred=deferred,
        steps=restored.results,
        checks=checks,
        resume_steps={run: step for s in restored.results for run, step in s["resume_steps"].items()},
        last_change=iso(last_change) if last_change else None,
        rpo_s=round(rpo, 3) if rpo is not None else None,
        rto_s=round(done_s, 3),
        left=left,
    )
    standby.record.failover = result.to_json()
    standby.store.save(standby.record)
    return result


def _drain(standby: Standby, seconds: float, on_event: Callable[[str], None]) -> None:
    """A planned failback: the current primary is alive and its application quiesced; keep applying what its
    followers still flush for ``seconds`` (at least one follower period) before the fence stops them."""
    deadline = time.monotonic() + seconds
    applied = 0
    while True:
        applied += len(standby.round().applied)
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    on_event(f"drained the current primary's followers for {seconds:.0f} s: {applied} link(s) applied")


def failback(
    repo: Repository,
    standby: Standby,
    *,
    lift: str | None = None,
    plan: Plan | None = None,
    drain_s: float = 10.0,
    on_event: Callable[[str], None] = lambda line: None,
) -> FailoverResult:
    """Planned failback: ``standby`` is the rebuilt old site hydrating from the current primary's set; move
    service back with the same steps and checks, once the current primary's application is quiesced and its
    followers drained (``drain_s``: at least one follower period). ``lift``:
    the old set's fence, removed once service is back, so the rebuilt site backs up under it again."""
    result = failover(
        repo,
        standby,
        plan=plan,
        force=True,
        reason="planned failback",
        planned=True,
        drain_s=drain_s,
        on_event=on_event,
    )
    if lift is not None and result.ok and lift_fence(repo, lift):
        on_event(f"lifted the fence of set {lift}: the rebuilt site may back it up again")
    return result


def _checks(
    plan: Plan, overrides: Mapping[str, Mapping[str, Any]], manifest: Manifest | None, clock0: float
) -> list[dict[str, Any]]:
    """The plan's checks against the standby; ``manifest``: the backup the plan's steps restored from (what
    training-resumes compares with), None when the standby's hydration was all."""
    results = run_checks(plan, overrides, manifest, clock=lambda: time.monotonic() - clock0)
    return [
        {
            "name": c.name,
            "ok": c.ok,
            "detail": c.detail,
            "green_s": c.green_s,
            "finished_s": c.finished_s,
            "facts": dict(c.facts),
        }  # training-resumes: recovery_step, torn_steps, steps_lost_at_least
        for c in results
    ]


def _last_change(standby: Standby) -> dt.datetime | None:
    times = [parse_iso((raw or {}).get("link_time")) for raw in standby.record.plugins.values()]
    return max((t for t in times if t is not None), default=None)
