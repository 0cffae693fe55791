"""What a plan run would do, without touching any target: order, skips, sizes, and each step's target keys.

`drtool restore --plan --dry-run` prints it for the whole plan; an approval prompt shows one step's share of
it (``planned_step``), so the person deciding reads what the step will change in the same words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from drtool.errors import NotFound, UsageError
from drtool.kube.transforms import Rewrite, preview, unmatched
from drtool.plans.dag import waves
from drtool.plans.loader import LoadedPlan
from drtool.plans.schema import Plan, Step
from drtool.plans.steps import skip_reason, step_target
from drtool.plans.validate import ensure_valid
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext


@dataclasses.dataclass
class PlannedStep:
    """What a dry run says about one step."""

    id: str
    uses: str
    wave: int
    action: str  # "restore", "skip" or "fail"
    reason: str = ""
    artifacts: int = 0
    bytes: int = 0
    target_keys: list[str] = dataclasses.field(default_factory=list)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    unset: list[str] = dataclasses.field(default_factory=list)
    rewrites: list[dict[str, str]] = dataclasses.field(default_factory=list)  # each field the transforms rewrite


def unresolved(value: Any) -> list[str]:
    """``${VAR}`` references the loader could not fill, anywhere in a step's target or options."""
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in unresolved(item)]
    if isinstance(value, list):
        return [v for item in value for v in unresolved(item)]
    return [value] if isinstance(value, str) and "${" in value else []


def planned_step(
    plan: Plan,
    step: Step,
    wave: int,
    repo: Repository,
    manifest: Manifest,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> PlannedStep:
    """One step's dry run: restore or skip (and why), its artifacts and bytes; every chunk checked present."""
    plugins = load_plugins()
    takes = getattr(plugins.get(step.uses), "takes_transforms", False)
    planned = PlannedStep(step.id, step.uses, wave, "restore", options=plan.options_for(step, takes))
    try:
        reason = skip_reason(step, manifest, plugins)
    except NotFound as exc:
        planned.action, planned.reason = "fail", exc.message
        return planned
    if reason:
        planned.action, planned.reason = "skip", reason
        return planned
    entries = manifest.artifacts_of(step.uses)
    planned.artifacts, planned.bytes = len(entries), sum(a.size for a in entries)
    ctx = PluginRestoreContext(repo, manifest, step.uses)
    ctx.preflight()
    if takes:
        planned.rewrites = [dataclasses.asdict(r) for r in preview(ctx, plan.transforms.engine())]
    target = step_target(plan, step, overrides)
    planned.target_keys = sorted(target)
    planned.unset = sorted(set(unresolved({**target, **step.with_})))
    return planned


def dry_run(
    loaded: LoadedPlan,
    repo: Repository,
    manifest: Manifest,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[PlannedStep]:
    """What a run would do, without touching any target: order, skips, sizes; every chunk checked present."""
    plan = ensure_valid(loaded)
    planned = [
        planned_step(plan, plan.step(step_id), wave_no, repo, manifest, overrides)
        for wave_no, wave in enumerate(waves(plan.steps))
        for step_id in wave
    ]
    check_transforms_match(plan, planned)
    return planned


def check_transforms_match(plan: Plan, planned: list[PlannedStep]) -> None:
    """Every rule of the plan's ``transforms:`` rewrites something in the steps that take them: one that
    matches nothing is a plan wrong about its backup (a pool renamed, a typo), refused before any write."""
    engine = plan.transforms.engine()
    if not engine:
        return
    idle = unmatched(engine, [Rewrite(**r) for p in planned for r in p.rewrites])
    if idle:
        more = f" (+{len(idle) - 1} more)" if len(idle) > 1 else ""
        raise UsageError(
            f"transform {idle[0]} matches nothing in backup {plan.source.backup!s}{more}",
            "fix the rule or remove it: `drtool restore --plan FILE --dry-run` lists what each rule rewrites",
        )


def wave_of(plan: Plan, step_id: str) -> int:
    """The wave (0-based) a step runs in."""
    return next(number for number, wave in enumerate(waves(plan.steps)) if step_id in wave)
