"""Everything `drtool plan validate` checks beyond the schema: plugins, the graph, waivers and variables.

Each problem carries the line it is on and a hint, because a plan is fixed by a person under pressure.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from drtool.plans.dag import find_cycle
from drtool.plans.loader import LoadedPlan, Problem, load_plan
from drtool.plans.schema import BUILT_IN_CHECK_TYPES, ContributedCheck, Plan
from drtool.plugin import settings
from drtool.plugin.checks import contributed
from drtool.plugin.manager import load_plugins
from drtool.plugin.settings import Kind, schema_of
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
    plugins = installed if isinstance(installed, Mapping) else {}  # names only: no settings to check against
    problems += settings_problems(loaded, plugins) + check_type_problems(loaded, plugins)
    problems += transforms_problems(loaded, plugins)
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


# ``with:`` keys the executor reads for every step, whatever its plugin: ``at``, a point of a delta chain
CORE_OPTIONS = ("at",)


def settings_problems(loaded: LoadedPlan, plugins: Mapping[str, Any]) -> list[Problem]:
    """Each step's target (the plan's block for its plugin, the step's own over it) and options (``with``)
    against its plugin's schema (drtool.plugin.settings): a misspelled key is an error with a suggestion."""
    plan = loaded.plan
    assert plan is not None
    found: list[Problem] = []
    for i, step in enumerate(plan.steps):
        schema = schema_of(plugins.get(step.uses))
        parts: tuple[tuple[Kind, dict[str, Any], str], ...] = (
            ("target", plan.target_for(step), "target"),
            ("option", {k: v for k, v in step.with_.items() if k not in CORE_OPTIONS}, "with"),
        )
        for kind, value, block in parts:
            model = schema.model(kind)
            for problem in settings.problems(model, value, kind, partial=True) if model else []:
                key = problem.key
                in_step = block == "with" or key in step.target
                line = loaded.line_of("steps", i, block, key) if in_step else loaded.line_of("target", step.uses, key)
                found.append(Problem(line, f"plan step {step.id!r}: {problem.message}", _describe_hint(step.uses)))
    for name in sorted(set(plan.target) - {s.uses for s in plan.steps}):  # a block no step reads yet
        model, mapping = schema_of(plugins.get(name)).target, plan.target[name]
        if model is None or not isinstance(mapping, Mapping):
            continue
        for problem in settings.problems(model, mapping, "target", partial=True):
            line = loaded.line_of("target", name, problem.key)
            found.append(Problem(line, f"plan target {name!r}: {problem.message}", _describe_hint(name)))
    return found


def check_type_problems(loaded: LoadedPlan, plugins: Mapping[str, Any]) -> list[Problem]:
    """Every check of a type no built-in model has: a type some installed plugin contributes, its keys that
    contribution's (drtool.plugin.checks)."""
    plan = loaded.plan
    assert plan is not None
    known = contributed(plugins)
    found: list[Problem] = []
    for i, check in enumerate(plan.checks):
        if not isinstance(check, ContributedCheck):
            continue
        if check.type not in known:
            types = sorted([*BUILT_IN_CHECK_TYPES, *known])
            close = difflib.get_close_matches(check.type, types, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"check types: {', '.join(types)}"
            line = loaded.line_of("checks", i, "type")
            found.append(Problem(line, f"checks[{i}]: check {check.id!r} has an unknown type {check.type!r}", hint))
            continue
        for problem in settings.problems(known[check.type].settings, check.settings(), "check"):
            line = loaded.line_of("checks", i, problem.key)
            found.append(Problem(line, f"checks[{i}] ({check.id}): {problem.message}"))
    return found


def transforms_problems(loaded: LoadedPlan, plugins: Mapping[str, Any]) -> list[Problem]:
    """A warning when the plan has ``transforms:`` but none of its steps' plugins takes them: the rewrites
    would be silently ignored (an author who moves a GPU pool expects the move to happen)."""
    plan = loaded.plan
    assert plan is not None
    if not plan.transforms.options() or not plugins:  # names only: what takes transforms is unknown
        return []
    takers = sorted(name for name, plugin in plugins.items() if getattr(plugin, "takes_transforms", False))
    if any(step.uses in takers for step in plan.steps):
        return []
    hint = f"add a step using {' or '.join(takers) or 'a plugin that takes transforms'}, or remove `transforms:`"
    return [Problem(loaded.line_of("transforms"), "the plan has `transforms:` but no step takes them", hint, "warning")]


def _describe_hint(plugin: str) -> str:
    return f"`drtool plugins --describe {plugin}` lists its keys"


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
