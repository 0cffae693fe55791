"""The plan steps a failover restores itself: those of plugins the standby does not hydrate (docs/standby.md).

The standby loop carries the plugins with ``StandbySupport`` (kubernetes, kueue). What the others back up —
training checkpoints into the standby site's object store, a model registry — a failover plan still names as
steps, and the failover restores them: each from the newest backup of the set that holds its plugin and that
the store received **before the fence** (a fenced primary's later backups are never read, whoever wrote
them), through the ordinary restore with its verification, into the plan's target for the step. Steps of the
standby's own plugins are done already: hydration applied them, release let them run.

A checkpoints step restores the newest complete checkpoint of each training run (what it resumes from; the
step's ``with: {checkpoints: [...]}`` chooses others), and its result says the step each run resumes from,
so the failover can report its RPO in training steps (``resume_steps``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from drtool.errors import DrtoolError
from drtool.plans.schema import Plan, Step
from drtool.plans.steps import step_target
from drtool.plugin.contract import VERDICT_TEXT
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import run_restore

CHECKPOINTS = "checkpoints"
DNS = "dns-certs"  # its step's `cutover` option re-points the service names (docs/dns-certs.md)


def dns_cut_over(results: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a ``dns-certs`` step restored the zones (its ``cutover`` re-points the service names)."""
    return any(r["uses"] == DNS and r["ok"] and r["backup"] for r in results)


def newest_holding(repo: Repository, backup_set: str, plugin: str, before: dt.datetime | None) -> Manifest | None:
    """The newest trusted backup of ``backup_set`` with ``plugin``'s artifacts that the store received before
    ``before`` (the fence)."""
    for manifest in repo.manifests_newest_first(repo.backup_ids()):
        if manifest.backup_set != backup_set or not manifest.trusted:
            continue
        if before is not None and (manifest.stored is None or manifest.stored >= before):
            continue
        if manifest.artifacts_of(plugin):
            return manifest
    return None


def newest_checkpoints(manifest: Manifest) -> dict[str, tuple[int, str]]:
    """Run -> (step, name) of the newest complete checkpoint the checkpoints plugin recorded in ``manifest``:
    what each run resumes from, so the failover restores those first (``with: {checkpoints: [...]}``
    restores others)."""
    outcome = manifest.plugins.get(CHECKPOINTS)
    newest: dict[str, tuple[int, str]] = {}
    for ck in (outcome.meta.get("checkpoints") or []) if outcome is not None else []:
        run, step = ck.get("run") or ck.get("source") or "", ck.get("step")
        if isinstance(step, int) and step >= newest.get(run, (step, ""))[0]:
            newest[run] = (step, str(ck.get("checkpoint", "")))
    return newest


@dataclasses.dataclass
class StepsDone:
    """What the plan's steps did: one result each, and the newest backup they restored from (the checks'
    manifest: training-resumes compares the resumed run with what it recorded)."""

    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    manifest: Manifest | None = None

    def collect(self, work: Callable[..., StepsDone], **kwargs: Any) -> None:
        """Run ``work`` (in the failover's thread for the steps): an error it raises becomes a failed result,
        so it cannot vanish with the thread."""
        try:
            done = work(**kwargs)
        except Exception as exc:
            self.results.append({"id": "plan-steps", "uses": "", "backup": None, "resume_steps": {}, "ok": False,
                                 "detail": f"{type(exc).__name__}: {exc}"})  # fmt: skip
            return
        self.results, self.manifest = done.results, done.manifest


def run_plan_steps(
    repo: Repository,
    plan: Plan,
    backup_set: str,
    hydrated: Collection[str],
    overrides: Mapping[str, Mapping[str, Any]],
    before: dt.datetime | None,
    clock: Callable[[], float],
    on_event: Callable[[str], None] = lambda line: None,
) -> StepsDone:
    """Restore each of ``plan``'s steps whose plugin is not in ``hydrated``, in plan order, from backups the
    store received before ``before`` (the fence); one result each (a step that cannot run fails with why; an
    optional one with nothing to restore is skipped)."""
    installed = load_plugins()
    done = StepsDone()
    for step in plan.steps:
        if step.uses in hydrated:
            continue
        started = clock()
        entry, manifest = _run(repo, plan, step, backup_set, installed, overrides, before)
        entry |= {"started_s": round(started, 3), "finished_s": round(clock(), 3)}
        on_event(f"{'ok' if entry['ok'] else 'FAILED':8} step {step.id} ({step.uses}): {entry['detail']}")
        done.results.append(entry)
        if manifest is not None and (done.manifest is None or manifest.started > done.manifest.started):
            done.manifest = manifest
    return done


def _run(
    repo: Repository,
    plan: Plan,
    step: Step,
    backup_set: str,
    installed: Mapping[str, Any],
    overrides: Mapping[str, Mapping[str, Any]],
    before: dt.datetime | None,
) -> tuple[dict[str, Any], Manifest | None]:
    entry: dict[str, Any] = {"id": step.id, "uses": step.uses, "backup": None, "resume_steps": {}}
    if step.uses not in installed:
        return entry | {"ok": step.optional, "detail": f"plugin {step.uses} is not installed"}, None
    manifest = newest_holding(repo, backup_set, step.uses, before)
    if manifest is None:
        when = " from before the fence" if before is not None else ""
        why = f"no backup of set {backup_set}{when} holds plugin {step.uses}"
        return entry | {"ok": step.optional, "detail": f"skipped: {why}" if step.optional else why}, None
    entry["backup"] = manifest.id
    newest = newest_checkpoints(manifest) if step.uses == CHECKPOINTS else {}
    options = {CHECKPOINTS: sorted(name for _, name in newest.values())} if newest else {}
    try:
        outcome = run_restore(
            repo, manifest, installed[step.uses], step_target(plan, step, overrides), options=options | step.with_
        )
    except DrtoolError as exc:
        return entry | {"ok": False, "detail": exc.one_line()}, None
    failed = [c for c in outcome.checks if not c.ok]
    said = ", verified" if outcome.verified else f"; {VERDICT_TEXT[outcome.verification]}"
    detail = outcome.result.summary + (f"; verification failed: {failed[0].name}" if failed else said)
    resume = {run: step for run, (step, _) in newest.items()}
    return entry | {"ok": not failed, "detail": detail, "resume_steps": resume}, manifest
