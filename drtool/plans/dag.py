"""The step graph: cycles, and the order steps may run in (waves of steps whose needs are all met)."""

from __future__ import annotations

from collections.abc import Sequence

from drtool.plans.schema import Step


def find_cycle(steps: Sequence[Step]) -> list[str] | None:
    """One cycle as step ids (``a -> b -> a``), or None. Needs that name no step are ignored here."""
    needs = {s.id: list(s.needs) for s in steps}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in needs.get(node, []):
            if nxt not in needs:
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for step in steps:
        if step.id not in state and (found := visit(step.id)):
            return found
    return None


def waves(steps: Sequence[Step]) -> list[list[str]]:
    """Steps grouped by depth: every step's needs lie in earlier waves. The graph must be acyclic."""
    depth: dict[str, int] = {}
    by_id = {s.id: s for s in steps}

    def level(step_id: str) -> int:
        if step_id not in depth:
            depth[step_id] = 1 + max((level(n) for n in by_id[step_id].needs if n in by_id), default=-1)
        return depth[step_id]

    out: list[list[str]] = []
    for step in steps:  # file order within a wave
        d = level(step.id)
        out.extend([] for _ in range(d + 1 - len(out)))
        out[d].append(step.id)
    return out


def downstream(steps: Sequence[Step], step_id: str) -> set[str]:
    """Every step that needs ``step_id``, directly or through others."""
    found: set[str] = set()
    frontier = {step_id}
    while frontier:
        frontier = {s.id for s in steps if set(s.needs) & frontier} - found
        found |= frontier
    return found
