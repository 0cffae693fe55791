"""What a plan's checks run with: the plan, its targets, the backup, and the run's clock (the core's side of
drtool.plugin.checks' ``CheckRun`` and ``CheckWatch``, which the plugins' platform checks are written against).

Checks run after the last step, on the run's clock (seconds since the run started), so a report can put
each check on the same timeline as the steps and say when the platform was back in service. Platform
checks mark the moment their condition first held (``Watch.green``); the rest of their time is the
stability window they watch afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from drtool.plans.steps import step_target
from drtool.plugin.contract import Check
from drtool.plugin.manager import load_plugins

if TYPE_CHECKING:
    from drtool.kube.client import KubeClient
    from drtool.plans.schema import Plan
    from drtool.repo.manifest import Manifest


def cluster_plugins(plugins: Mapping[str, Any]) -> list[str]:
    """The installed plugins whose restore writes a cluster's objects (``restores_cluster`` in the contract)."""
    return sorted(name for name, plugin in plugins.items() if getattr(plugin, "restores_cluster", False))


@dataclasses.dataclass
class CheckContext:
    plan: Plan
    overrides: Mapping[str, Mapping[str, Any]]
    manifest: Manifest | None = None  # the backup restored (training-resumes reads what it recorded)
    clock: Callable[[], float] = time.monotonic  # the run's clock: seconds since it started

    @property
    def restore_started(self) -> dt.datetime:
        """When the run began, as a wall-clock time (what CertificateRequests' timestamps compare with)."""
        return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=self.clock())

    def target(self, step_id: str) -> dict[str, Any]:
        return step_target(self.plan, self.plan.step(step_id), self.overrides)

    def cluster(self) -> dict[str, Any]:
        """The restored cluster: the target of a plugin that ``restores_cluster`` (the kubernetes plugin), else
        the first step's with a kubeconfig."""
        for name in cluster_plugins(load_plugins()):
            preferred = {**(self.plan.target.get(name) or {}), **(self.overrides.get(name) or {})}
            if preferred.get("kubeconfig"):
                return preferred
        for step in self.plan.steps:
            target = step_target(self.plan, step, self.overrides)
            if target.get("kubeconfig"):
                return target
        return {}

    def kube(self) -> KubeClient:
        from drtool.kube.readings import cluster_client  # the Kubernetes client loads only for checks that read

        return cluster_client(self.cluster())


@dataclasses.dataclass
class Watch:
    """One check's times on the run's clock: started, first green, finished."""

    clock: Callable[[], float]
    started_s: float = 0.0
    green_s: float | None = None

    def __post_init__(self) -> None:
        self.started_s = self.clock()

    def green(self) -> None:
        """The check's condition holds now (kept from the first call: later calls change nothing)."""
        if self.green_s is None:
            self.green_s = self.clock()


@dataclasses.dataclass(frozen=True)
class TimedCheck(Check):
    """A plan check's result with its times on the run's clock (``green_s``: when it first held)."""

    started_s: float = 0.0
    green_s: float | None = None
    finished_s: float = 0.0
    facts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
