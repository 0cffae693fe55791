"""Plan check types a plugin contributes: the ``platform_checks`` hook of the plugin contract.

A plan's ``checks:`` entry whose ``type`` is not one of drtool's own (kube-object, http, tcp and the
platform checks in drtool/plans/platform/) is looked up among the installed plugins' contributions: `plan
validate` checks its keys against the contribution's ``settings`` model (with a did-you-mean, like a plugin's
settings), and a run calls its ``run`` after the last step, at the same time as every other check. So a
plugin adds a check (a database accepting writes, a queue draining) without editing the core.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict


class CheckSettings(BaseModel):
    """Base of a contributed check's model: ``type`` and ``id`` as in every check, the rest the plugin's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    id: str

    def summary(self) -> str:
        """One line for the runbook and the dry run: what the check proves."""
        return f"{self.type} check"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a check found: whether it passed, one line saying why, and facts a report may show."""

    ok: bool
    detail: str
    facts: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class CheckRun(Protocol):
    """What a check runs with (drtool.plans.platform.context.CheckContext is the core's)."""

    manifest: Any  # the backup restored (drtool.repo.manifest.Manifest), or None

    @property
    def restore_started(self) -> dt.datetime: ...

    def target(self, step_id: str) -> dict[str, Any]:
        """The target the plan's step ``step_id`` restored into (with a rehearsal's overrides)."""
        ...

    def cluster(self) -> dict[str, Any]:
        """The restored cluster's target (of the plugin with ``restores_cluster``), {} when there is none."""
        ...


class CheckWatch(Protocol):
    def green(self) -> None:
        """The condition holds now: the report shows when service was back (later calls change nothing)."""
        ...


@dataclasses.dataclass(frozen=True)
class PlatformCheck:
    """One check type: ``checks: [{type: <type>, id: ..., <settings' keys>}]`` in a plan.

    ``run`` gets the parsed settings, the run's context and a watch; it returns a Verdict, raising only
    for what it cannot do (the core turns that into a failed check with the reason). ``reads_cluster``: the
    check reads the restored cluster, so it is left out with the cluster's step (`drtool demo` without one).
    """

    type: str
    settings: type[CheckSettings]
    run: Callable[[Any, CheckRun, CheckWatch], Verdict]
    reads_cluster: bool = False


def contributed(plugins: Mapping[str, Any]) -> dict[str, PlatformCheck]:
    """Check type -> its contribution, over ``plugins`` (name -> plugin); the first plugin to claim a type wins."""
    found: dict[str, PlatformCheck] = {}
    for name in sorted(plugins):
        hook = getattr(plugins[name], "platform_checks", None)
        for check in hook() if callable(hook) else ():
            found.setdefault(check.type, check)
    return found
