"""Everything `drtool plan validate` checks beyond the schema: plugins, the graph, waivers and variables.

Each problem carries the line it is on and a hint, because a plan is fixed by a person under pressure.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from drtool.plans.dag import find_cycle
from drtool.plans.loader import LoadedPlan, Problem, load_plan
from drtool.plans.schema import Plan
from drtool.plugin.manager import load_plugins
from drtool.secure_paths import ALLOW_ENV, FilePolicy, dotted, file_settings


def validate(loaded: LoadedPlan, installed: Collection[str]) -> LoadedPlan:
    """Add graph, plugin, waiver and variable problems to ``loaded`` (schema problems are already there)."""
    plan = loaded.plan
    loaded.validated = True
    if plan is None:
        return loaded
    ids = {s.id for s in plan.steps}
    problems = loaded.problems
    for i, step in enumerate(plan.steps):
        if step.uses not in installed:
            known = ", ".join(sorted(installed)) or "none"
            if step.optional:
                problems.append(
                    Problem(
                        loaded.line_of("steps", i, "uses"),
                        f"step {step.id}: plugin {step.uses!r} is not installed; this optional step will be skipped",
                        f"installed plugins: {known}",
                        "warning",
                    )
                )
            else:
                problems.append(
                    Problem(
                        loaded.line_of("steps", i, "uses"),
                        f"step {step.id} uses unknown plugin {step.uses!r}",
                        f"installed plugins: {known}; or mark the step `optional: true`",
                    )
                )
        for j, need in enumerate(step.needs):
            if need == step.id:
                problems.append(
                    Problem(loaded.line_of("steps", i, "needs", j), f"step {step.id} needs itself", "remove it")
                )
            elif need not in ids:
                problems.append(
                    Problem(
                        loaded.line_of("steps", i, "needs", j),
                        f"step {step.id} needs {need!r}, which is no step of this plan",
                        f"steps are: {', '.join(sorted(ids))}",
                    )
                )
    cycle = find_cycle(plan.steps)
    if cycle and len(cycle) > 2:  # a step needing itself is reported above
        problems.append(
            Problem(
                loaded.step_line(cycle[0], "needs"),
                f"the steps form a cycle: {' -> '.join(cycle)}",
                "remove one of these needs; a plan is a DAG",
            )
        )
    for i, waiver in enumerate(plan.waivers):
        if waiver.step and waiver.step not in ids:
            problems.append(
                Problem(
                    loaded.line_of("waivers", i, "step"),
                    f"waiver for {waiver.match!r} names step {waiver.step!r}, which is no step of this plan",
                    "name an existing step or drop `step:`",
                )
            )
    problems += _file_problems(loaded, FilePolicy.from_env())
    for name, line in sorted(loaded.unset.items(), key=lambda kv: kv[1]):
        problems.append(
            Problem(
                line or None,
                f"variable ${{{name}}} is not set",
                f"export DRTOOL_VAR_{name}, put it in a --values file, or write ${{{name}:-default}}; steps using it "
                "cannot run until it is set",
                "warning",
            )
        )
    return loaded


def _file_problems(loaded: LoadedPlan, policy: FilePolicy) -> list[Problem]:
    """A ``*_file`` setting in the plan's targets or options naming drtool's secrets or a file outside the
    folders the operator allows (drtool.secure_paths): refused here, before any step reads or sends it."""
    data = loaded.data
    found = list(file_settings(data.get("target"), ("target",)))
    for i, step in enumerate(data.get("steps") or []):
        if isinstance(step, dict):
            found += file_settings({k: step.get(k) for k in ("target", "with")}, ("steps", i))
    problems = []
    for loc, value in found:
        why = None if "${" in value else policy.refusal(dotted(loc), value)
        if why:
            hint = f"keep such files in a folder the operator lists in {ALLOW_ENV}"
            problems.append(Problem(loaded.line_of(*loc), why, hint))
    return problems


def check_file(path: Path | str, installed: Collection[str], values: dict[str, str] | None = None) -> LoadedPlan:
    """Load and fully validate a plan file."""
    return validate(load_plan(path, values=values), installed)


def ensure_valid(loaded: LoadedPlan) -> Plan:
    """The plan, once schema, graph and plugins are checked (a cycle would never finish); else a UsageError."""
    if not loaded.validated:
        validate(loaded, load_plugins())
    return loaded.require()
