"""The failure drill matrix: each scenario, what is injected, what recovers it, what judges it.

``runnable`` scenarios have an injector drtool ships (``drtool drill NAME``); the others are listed so the
matrix shows them as never drilled until they do. ``whole-cluster-lost`` is today's rehearsal
(`drtool rehearse`): its drills come from the rehearsal records.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    injected: str
    recovered_by: str  # the shipped plan (restore-plans/NAME.yaml) or what recovers it
    judged_by: str
    runnable: bool = False


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("whole-cluster-lost", "source stopped", "full-cluster-rebuild", "platform checks", runnable=True),
        Scenario(
            "bad-write",
            "a mass delete or corrupting write at T",
            "bad-write-pitr (etcd's chain, at: just before T)",
            "the objects as of T, nothing after",
            runnable=True,
        ),
        Scenario(
            "namespace-deleted",
            "a team namespace deleted",
            "namespace-restore",
            "workloads serving, quotas admit",
            runnable=True,
        ),
        Scenario(
            "kueue-config-deleted",
            "ClusterQueues and ResourceFlavors deleted",
            "kueue-quotas-only",
            "queued jobs admitted again",
            runnable=True,
        ),
        Scenario(
            "checkpoint-store-down",
            "object store stopped mid-save",
            "training-resume",
            "resumes bit for bit, steps lost counted",
            runnable=True,
        ),
        Scenario(
            "gpu-pool-lost",
            "a GPU node pool deleted",
            "no restore: its quota drained, Kueue admits on the remaining flavor",
            "admitted elsewhere and running, time to admission",
            runnable=True,
        ),
        Scenario(
            "certs-dns-lost",
            "issuer secrets and zone records removed",
            "dns-certs-restore",
            "no re-issue, records resolve",
            runnable=True,
        ),
        Scenario(
            "registry-lost",
            "the registry the workloads pull from wiped",
            "registry-restore",
            "every workload's image pulls by digest",
            runnable=True,
        ),
    )
}
