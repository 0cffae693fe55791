"""One step of a plan against one backup: where it restores to, and whether it will run (and if not, why).

Every part of drtool that talks about a step (the executor, a dry run, the rehearsal, the independence
analysis, the runbook, the plan's checks) asks here, so they all agree and say it in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.errors import NotFound
from drtool.plans.schema import Plan, Step
from drtool.repo.manifest import Manifest

NOT_INSTALLED = "plugin {uses} is not installed"
NOT_IN_BACKUP = "plugin not in backup"
FAILED_IN_BACKUP = "plugin failed in backup"
LEFT_OUT = "plugin left out: {why}"


def step_target(plan: Plan, step: Step, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The plan's target for the step's plugin, the step's own over it, then a caller's (a rehearsal's lab)."""
    return {**plan.target_for(step), **((overrides or {}).get(step.uses) or {})}


def why_not_run(
    step: Step, manifest: Manifest | None, installed: Mapping[str, Any], left_out: Mapping[str, str] | None = None
) -> str | None:
    """None when ``step`` will run: its plugin is installed and holds artifacts in ``manifest``; else why not.

    ``manifest`` None (no backup matches the plan today) checks the installation only. ``left_out`` names
    plugins the caller left out on purpose, with why (`drtool demo` on a machine without a plugin's lab).
    """
    if left_out and step.uses in left_out:
        return LEFT_OUT.format(why=left_out[step.uses])
    if step.uses not in installed:
        return NOT_INSTALLED.format(uses=step.uses)
    if manifest is None or manifest.artifacts_of(step.uses):
        return None
    outcome = manifest.plugins.get(step.uses)
    return FAILED_IN_BACKUP if outcome is not None and outcome.status == "failed" else NOT_IN_BACKUP


def skip_reason(
    step: Step, manifest: Manifest, installed: Mapping[str, Any], left_out: Mapping[str, str] | None = None
) -> str | None:
    """Why an optional step will not run (None: it runs); a required step that cannot run is an error, unless
    its plugin was left out on purpose (``left_out``): what the caller chose to leave out is skipped, not failed."""
    why = why_not_run(step, manifest, installed, left_out)
    if why is None or step.optional or (left_out and step.uses in left_out):
        return why
    about_backup = why in (NOT_IN_BACKUP, FAILED_IN_BACKUP)
    raise NotFound(
        f"step {step.id}: {why} {manifest.id}" if about_backup else f"step {step.id}: {why}",
        "choose another backup (source.backup) or mark the step `optional: true`",
    )
