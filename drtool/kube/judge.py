"""One object, backup against target, field by field, each difference judged by who made it.

The rule (docs/kubernetes.md, "Verify"): every field the backup holds is what the restore wrote, and must
hold the backup's value in the target. A difference there is **drift** and fails, naming the field and the
manager that owns its value now (``kube-controller-manager``, ``kueue``, an HPA, a person's ``kubectl``),
or ``drtool`` itself when the value was written by drtool from something else (another backup). A field
the target has beyond the backup is **added**: what the platform does with a restored object (a
controller's annotation, a webhook's default, a finalizer) is listed with its manager, not failed — unless
drtool wrote it, which means the target holds another restore's state. A custom resource's status that
its controller updated after the restore wrote it is listed too: status is the controller's to keep
current (drtool writes it only so that, for one, cert-manager does not re-issue).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .client import FIELD_MANAGER
from .fields import Manager, Path, flatten, list_kinds, managers, show, value_text

DRIFT = "drift"  # a field of the backup has another value, or is gone: fails
FOREIGN_WRITE = "written by drtool, not in this backup"  # fails
ADDED = "added"  # a field the backup does not have, set by another manager or defaulted: listed
STATUS = "status"  # status the restore wrote, updated since by its controller: listed
FAILING = (DRIFT, FOREIGN_WRITE)
_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class FieldChange:
    path: Path
    kind: str
    backup: Any  # _ABSENT when the backup does not have the field
    target: Any  # _ABSENT when the target does not have it
    owners: tuple[str, ...]  # managers owning the target's value, described

    @property
    def failing(self) -> bool:
        return self.kind in FAILING

    def by(self) -> str:
        if self.target is _ABSENT:
            return "removed" + (f" (what holds it now: {', '.join(self.owners)})" if self.owners else "")
        if self.owners:
            return "by " + ", ".join(self.owners)
        return "defaulted by the API server (no manager)"

    def line(self) -> str:
        where = show(self.path)
        if self.kind == ADDED:
            return f"{where} = {value_text(self.target)} {self.by()}"
        was = "(absent)" if self.backup is _ABSENT else value_text(self.backup)
        now = "(absent)" if self.target is _ABSENT else value_text(self.target)
        return f"{where}: backup {was}, target {now} {self.by()}"

    def manager_names(self) -> tuple[str, ...]:
        return tuple(o.split(" (", 1)[0] for o in self.owners) or ("(no manager)",)


@dataclasses.dataclass(frozen=True)
class Judgement:
    key: str
    changes: tuple[FieldChange, ...]

    @property
    def failing(self) -> list[FieldChange]:
        return [c for c in self.changes if c.failing]

    @property
    def ok(self) -> bool:
        return not self.failing


def judge(key: str, backup: Mapping[str, Any], target: Mapping[str, Any], live: Mapping[str, Any]) -> Judgement:
    """``backup`` and ``target`` in comparable form (``objects.comparable_*``); ``live`` the target's object as
    read, whose managedFields say who owns what. A subtree only one side has (an added annotation, a new
    status condition) is one change, at its root."""
    found = managers(live)
    kinds = list_kinds(found)
    want = dict(flatten(backup, kinds))
    have = dict(flatten(target, kinds))
    changes = [
        _changed(found, path, was, have[path]) for path, was in want.items() if path in have and have[path] != was
    ]
    changes += _one_sided(found, want, have, backup_side=True)
    changes += _one_sided(found, have, want, backup_side=False)
    return Judgement(key, tuple(changes))


def _changed(found: list[Manager], path: Path, was: Any, now: Any) -> FieldChange:
    owners = _owners(found, path)
    kind = STATUS if path[0] == "f:status" and not any(_is_drtool(m) for m in owners) else DRIFT
    return FieldChange(path, kind, was, now, tuple(m.describe() for m in owners))


def _one_sided(
    found: list[Manager], side: dict[Path, Any], other: dict[Path, Any], backup_side: bool
) -> list[FieldChange]:
    """Leaves of ``side`` that ``other`` lacks, grouped under the root of the subtree ``other`` lacks."""
    present = {p[:i] for p in other for i in range(1, len(p) + 1)}
    roots: dict[Path, list[Path]] = {}
    for path, value in side.items():
        if path in other or (backup_side and value in ({}, []) and path in present):
            continue  # an empty map or list of the backup that the target has filled: the additions are below
        # the shortest prefix the other side lacks (the path itself when the other side has a subtree there)
        root = next((path[:i] for i in range(1, len(path) + 1) if path[:i] not in present), path)
        roots.setdefault(root, []).append(path)
    roots = {leaves[0] if len(leaves) == 1 else root: leaves for root, leaves in roots.items()}
    out = []
    for root, leaves in roots.items():
        value = side[root] if leaves == [root] else {"…": f"{len(leaves)} fields"}
        if backup_side:  # in the backup, gone from the target: who owns what holds it now
            parent = next((root[:i] for i in range(len(root) - 1, 0, -1) if root[:i] in present), ())
            holders = _owners(found, parent) if parent else []
            # a status field gone from an object whose status a controller writes: the controller's to keep (a
            # held RayJob's operator clears the dashboard URL it had reported in the source)
            by_controller = root[0] == "f:status" and any(
                not _is_drtool(m) for m in [*holders, *(m for m in found if _writes_status(m))]
            )
            kind = STATUS if by_controller else DRIFT
            out.append(FieldChange(root, kind, value, _ABSENT, tuple(m.describe() for m in holders)))
        else:
            owners = {m.describe(): m for leaf in leaves for m in _owners(found, leaf)}
            kind = FOREIGN_WRITE if any(_is_drtool(m) for m in owners.values()) else ADDED
            kind = STATUS if root[0] == "f:status" and kind == ADDED else kind
            out.append(FieldChange(root, kind, _ABSENT, value, tuple(owners)))
    return out


def _owners(found: list[Manager], path: Path) -> list[Manager]:
    return [m for m in found if m.owns(path, found)]


def _writes_status(manager: Manager) -> bool:
    return any(node[:1] == ("f:status",) for node in manager.nodes)


def _is_drtool(manager: Manager) -> bool:
    return manager.name == FIELD_MANAGER and manager.operation == "Apply"
