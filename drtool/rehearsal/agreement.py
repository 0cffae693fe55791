"""Both halves agree: what the rehearsal's guard caught, the static analysis must have found.

The static analysis (drtool.independence) says what a restore will need from the failure domain; the
rehearsal's isolation (guard, namespace, resolver) sees what it actually tried to reach. A refused attempt
that the analysis did not report as needed from the domain — not found at all, or judged independent, or
claimed remediated — means one half is wrong, and that is a drtool bug (or a plugin's): each such attempt is
a **bug pair** in the rehearsal report, with what the analysis said about that address.

An attempt and a finding are the same dependency when their hosts are equal and their ports are, or one
side names no port (a DNS lookup has none; a finding for a whole host covers its ports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from drtool.independence.domain import Address, parse_address
from drtool.rehearsal.guard import Refusal

KNOWN = ("inside", "waived", "unknown")  # what the analysis reports as needed from, or not clear of, the domain


def bug_pairs(refused: Iterable[Refusal], independence: Mapping[str, Any]) -> list[dict[str, Any]]:
    findings = [(parse_address(f["address"]), f) for f in independence.get("findings") or []]
    out = []
    for refusal in refused:
        attempt = parse_address(refusal.address)
        if attempt is None:
            continue
        same = [f for address, f in findings if address is not None and _same(attempt, address)]
        if any(f["status"] in KNOWN for f in same):
            continue
        said = "; ".join(f"{f['status']}: {f['detail']}" for f in same) or "not found by the analysis"
        out.append({**refusal.to_dict(), "analysis": said})
    return out


def _same(attempt: Address, finding: Address) -> bool:
    if attempt.host != finding.host:
        return False
    return attempt.port is None or finding.port is None or attempt.port == finding.port
