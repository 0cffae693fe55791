"""Whether Kueue's verdict on a ClusterQueue is settled: consistent with the objects the queue names, as they are.

Kueue judges a ClusterQueue from its caches, which see flavors, AdmissionChecks and queues through separate
watches, and an AdmissionCheck is ``Active`` only once its own controller says so, some time after it is
(re)created. So for a moment after a restore (or a seed) a queue can be called ``FlavorNotFound`` or
``AdmissionCheckNotFound`` though what it names exists, ``AdmissionCheckInactive`` though its checks are
Active, or have no verdict yet. A verify that judged that moment, or a backup that recorded it as the
source's state, depended on luck (CI: a restored queue judged against a source verdict read too early).
``unsettled`` names such a verdict; callers wait for it, bounded, on the condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from drtool.kube.readings import conditions, is_true

from .refs import cq_checks, cq_flavors

Obj = dict[str, Any]


def active_checks(checks: Iterable[Obj]) -> dict[str, bool]:
    """AdmissionCheck name -> whether its controller reports it ``Active``."""
    return {c["metadata"]["name"]: is_true(c, "Active") for c in checks}


def unsettled(cq: Obj, flavors: set[str], checks: Mapping[str, bool]) -> str | None:
    """Why Kueue's verdict on ``cq`` is not yet what it will be, given the ``flavors`` and AdmissionChecks
    (name -> Active) that exist; None when it is settled."""
    name = cq["metadata"]["name"]
    verdict = conditions(cq).get("Active")
    if verdict is None:
        return f"{name}: no verdict yet"
    seen = verdict.get("observedGeneration")
    if seen is not None and seen != cq["metadata"].get("generation", seen):
        return f"{name}: verdict of generation {seen}, the queue is at {cq['metadata']['generation']}"
    named_flavors = {n for _, n, _ in cq_flavors(cq, "")}
    named_checks = {n for _, n, _ in cq_checks(cq, "")}
    reason = verdict.get("reason")
    if reason == "FlavorNotFound" and named_flavors <= flavors:
        return f"{name}: FlavorNotFound, though its flavors exist"
    if reason == "AdmissionCheckNotFound" and named_checks <= set(checks):
        return f"{name}: AdmissionCheckNotFound, though its AdmissionChecks exist"
    if reason == "AdmissionCheckInactive" and all(checks.get(n) for n in named_checks):
        return f"{name}: AdmissionCheckInactive, though its AdmissionChecks are Active"
    inactive = sorted(n for n in named_checks if not checks.get(n))
    if verdict.get("status") == "True" and inactive:
        return f"{name}: Active, though AdmissionCheck {', '.join(inactive)} is not"
    return None


def check_states(cq: Obj, checks: Mapping[str, bool]) -> str:
    """The AdmissionChecks ``cq`` names and whether each is Active, for a failure's detail."""
    named = sorted({n for _, n, _ in cq_checks(cq, "")})
    states = {True: "Active", False: "not Active (its controller has not reported it Active)", None: "missing"}
    return "; ".join(f"AdmissionCheck {n}: {states[checks.get(n)]}" for n in named)
