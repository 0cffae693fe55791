"""Who wrote which field of a live object, read from its ``managedFields``, and objects cut into those fields.

Server-side apply records, for every field manager, the set of fields it owns (``managedFields[].fieldsV1``):
a tree whose keys are ``f:<name>`` (a field of a map), ``k:<JSON>`` (the item of a keyed list whose key
fields have those values), ``v:<JSON>`` (an item of a set), ``i:<n>`` (an item by position) and ``.`` (the
node itself); an empty subtree is a leaf, owned whole (an atomic list or map included). Verification needs
exactly this to tell what the restore wrote (manager ``drtool``) from what a controller, a webhook or a person
changed or added since (docs/kubernetes.md, "Verify").

``flatten`` cuts an object into leaf paths written the same way, so a path of the backup's object, of the
live object and of a manager's set are one and the same tuple. Lists are cut the way the live object's own
managers cut them: keyed lists by their keys (``containers`` by ``name``), sets by value; a list no manager
cuts is atomic (a leaf), as server-side apply treats it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Path = tuple[str, ...]
Obj = dict[str, Any]
# ownerReferences are keyed by uid in managedFields, and compared without uids (they differ by design)
ATOMIC: frozenset[Path] = frozenset({("f:metadata", "f:ownerReferences")})


@dataclasses.dataclass(frozen=True)
class Manager:
    """One entry of ``managedFields``: who, how (Apply or Update), on which subresource, when, and what."""

    name: str
    operation: str
    subresource: str
    time: str
    nodes: frozenset[Path]  # every path the entry names (leaves and "." nodes)
    leaves: frozenset[Path]  # paths owned whole, everything below them included

    def owns(self, path: Path, others: Sequence[Manager] = ()) -> bool:
        """Whether this manager owns ``path``: named in its set, or below a leaf of it that is atomic. A leaf
        under which ``others`` own fields is a granular map or list whose existence alone it owns (an
        applied ``annotations: {}``), not its members."""
        if path in self.nodes:
            return True
        for i in range(1, len(path)):
            leaf = path[:i]
            if leaf in self.leaves and not any(_below(leaf, o.nodes) for o in others if o is not self):
                return True
        return False

    def describe(self) -> str:
        where = f" /{self.subresource}" if self.subresource else ""
        return f"{self.name} ({self.operation}{where}{', ' + self.time if self.time else ''})"


def _below(prefix: Path, nodes: frozenset[Path]) -> bool:
    return any(len(n) > len(prefix) and n[: len(prefix)] == prefix for n in nodes)


def _walk(tree: Mapping[str, Any], prefix: Path) -> Iterator[tuple[Path, bool]]:
    """(path, is_leaf) of every node of a fieldsV1 tree."""
    for key, sub in tree.items():
        if key == ".":
            yield prefix, False
            continue
        path = (*prefix, _canonical(key))
        if isinstance(sub, Mapping) and sub:
            yield from _walk(sub, path)
        else:
            yield path, True


def _canonical(segment: str) -> str:
    """``k:``/``v:`` segments re-encoded one way (sorted keys, no spaces), whoever wrote them."""
    if segment[:2] in ("k:", "v:"):
        return segment[:2] + _json(json.loads(segment[2:]))
    return segment


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def managers(obj: Mapping[str, Any]) -> list[Manager]:
    """The object's field managers, as ``Manager`` values (an object without managedFields has none)."""
    out = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        nodes, leaves = set(), set()
        for path, leaf in _walk(entry.get("fieldsV1") or {}, ()):
            nodes.add(path)
            if leaf:
                leaves.add(path)
        out.append(
            Manager(
                name=str(entry.get("manager") or "(unnamed)"),
                operation=str(entry.get("operation") or ""),
                subresource=str(entry.get("subresource") or ""),
                time=str(entry.get("time") or ""),
                nodes=frozenset(nodes),
                leaves=frozenset(leaves),
            )
        )
    return out


def list_kinds(found: list[Manager]) -> dict[Path, tuple[str, ...]]:
    """How each list of the live object is cut, as its managers cut it: path -> ("k", key names...),
    ("v",) or ("i",). A list absent here is atomic."""
    kinds: dict[Path, tuple[str, ...]] = {}
    for manager in found:
        for path in manager.nodes:
            segment = path[-1]
            parent = path[:-1]
            if parent in kinds or parent in ATOMIC:
                continue
            if segment.startswith("k:"):
                kinds[parent] = ("k", *sorted(json.loads(segment[2:])))
            elif segment.startswith("v:"):
                kinds[parent] = ("v",)
            elif segment.startswith("i:"):
                kinds[parent] = ("i",)
    return kinds


def flatten(value: Any, kinds: Mapping[Path, tuple[str, ...]], prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """(path, value) of every leaf: scalars, empty maps, and lists that are atomic (or empty)."""
    if isinstance(value, Mapping):
        if not value and prefix:
            yield prefix, {}
        for key, sub in value.items():
            yield from flatten(sub, kinds, (*prefix, f"f:{key}"))
        return
    kind = kinds.get(prefix) if isinstance(value, list) and value else None
    if kind is None:
        yield prefix, value
    elif kind[0] == "v":
        for item in value:
            yield (*prefix, f"v:{_json(item)}"), item
    elif kind[0] == "k" and all(isinstance(item, Mapping) for item in value):
        for item in value:
            key = {name: item[name] for name in kind[1:] if name in item}
            yield from flatten(item, kinds, (*prefix, f"k:{_json(key)}"))
    else:
        for i, item in enumerate(value):
            yield from flatten(item, kinds, (*prefix, f"i:{i}"))


def show(path: Path) -> str:
    """A path as people read it: ``spec.template.spec.containers[name=server].image``,
    ``metadata.annotations["deployment.kubernetes.io/revision"]``."""
    out = ""
    for segment in path:
        kind, text = segment[:2], segment[2:]
        if kind == "f:":
            out += f'["{text}"]' if set(text) & set("./") else (f".{text}" if out else text)
        elif kind == "k:":
            out += "[" + ",".join(f"{k}={v}" for k, v in json.loads(text).items()) + "]"
        elif kind == "v:":
            out += f"[{text}]"
        else:
            out += f"[{text}]"
    return out or "(the whole object)"


def value_text(value: Any, limit: int = 60) -> str:
    text = _json(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
