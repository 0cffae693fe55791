"""Plan check types a plugin contributes: the ``platform_checks`` hook of the plugin contract.

A plan's ``checks:`` entry whose ``type`` is not one of drtool's own readings (kube-object, http, tcp) is
looked up among the installed plugins' contributions: `plan validate` checks its keys against the
contribution's ``settings`` model (with a did-you-mean, like a plugin's settings), and a run calls its ``run``
after the last step, at the same time as every other check. The built-in platform checks come this way too
(kueue-admits from the kueue plugin, workloads-ready and gc-stable from kubernetes, no-reissue from
dns-certs, training-resumes from checkpoints), so a plugin adds a check (a database accepting writes, a queue
draining) without editing the core. A check whose entry has a ``step`` key is about that plan step: the plan
must have it, and the check is skipped when that optional step did not run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict

# a check's ``namespaces:`` (empty or absent: every namespace)
NamespaceList = Annotated[list[str], BeforeValidator(lambda v: v if v is not None else [])]


class CheckSettings(BaseModel):
    """Base of a contributed check's model: ``type`` and ``id`` as in every check, the rest the plugin's."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

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
    plan: Any  # the plan run (drtool.plans.schema.Plan): ``plan.step(id).uses`` names a step's plugin

    @property
    def restore_started(self) -> dt.datetime: ...

    def target(self, step_id: str) -> dict[str, Any]:
        """The target the plan's step ``step_id`` restored into (with a rehearsal's overrides)."""
        ...

    def cluster(self) -> dict[str, Any]:
        """The restored cluster's target (of the plugin with ``restores_cluster``), {} when there is none."""
        ...

    def kube(self) -> Any:
        """A client of the restored cluster (drtool.kube.client.KubeClient); a UsageError when none is named."""
        ...


class CheckWatch(Protocol):
    clock: Callable[[], float]  # the run's clock: seconds since it started
    started_s: float  # when this check started, on that clock

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
