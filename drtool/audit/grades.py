"""One graded checklist item and the scorecard of all of them: the shape every audit item returns.

A grade is never a bare verdict: ``evidence`` lists what was read (an object, a record, a file) and what it
showed, so a person can check the grade without re-running the audit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Literal

Status = Literal["pass", "fail", "unknown"]
RANK: dict[Status, int] = {"pass": 0, "unknown": 1, "fail": 2}


@dataclasses.dataclass
class Grade:
    item: str  # a short stable id (metric label, JSON key)
    title: str  # the checklist's sentence
    status: Status
    evidence: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def worst(statuses: Iterable[Status], empty: Status = "unknown") -> Status:
    """fail > unknown > pass; ``empty`` when there is nothing to grade."""
    found = list(statuses)
    return max(found, key=RANK.__getitem__) if found else empty


@dataclasses.dataclass
class Scorecard:
    grades: list[Grade]
    scope: str  # what was read: the cluster's server and namespaces, the catalog
    generated: str

    @property
    def verdict(self) -> Status:
        return worst((g.status for g in self.grades), empty="pass")

    def to_dict(self) -> dict[str, Any]:
        counts = {s: sum(g.status == s for g in self.grades) for s in RANK}
        return {
            "kind": "audit",
            "scope": self.scope,
            "generated": self.generated,
            "verdict": self.verdict,
            "counts": counts,
            "items": [g.to_dict() for g in self.grades],
        }
