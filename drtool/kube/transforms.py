"""A restore plan's ``transforms:``: the backup's objects rewritten for the cluster a team actually has.

One engine, four transforms, each a map from the source's value to the target's:
- ``storage-classes``: a claim's ``spec.storageClassName`` (PersistentVolumeClaims, PersistentVolumes,
  StatefulSets' ``volumeClaimTemplates``) and the legacy ``volume.beta.kubernetes.io/storage-class``
  annotation;
- ``image-registries``: every container image reference (any string field named ``image``) whose registry
  host is mapped, path, tag and digest kept (the hosts the images step restored to);
- ``namespaces``: ``metadata.namespace``, a Namespace's own name and RoleBinding subjects' namespaces;
- ``node-labels``: ``key=value`` to ``key=value`` in every ``nodeSelector``, in Kueue ResourceFlavors'
  ``spec.nodeLabels`` and in node-affinity ``matchExpressions`` (a source H100 pool to a target A100 pool).

The kubernetes and kueue plugins apply the same ``Transforms`` on their restore path and to the backup side
of their verification, so a transformed restore is compared with the transformed backup. Every rewrite is
recorded (``Rewrite``) so a dry run can print each field a transform changes, and a rule that rewrote
nothing is an error (``unmatched``): a map that matches nothing is a plan that is wrong about its backup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from drtool.errors import UsageError
from drtool.plugin.toolkit.oci.refs import registry_host

from .objects import map_namespaces, object_key

if TYPE_CHECKING:  # settings.py reads Transforms, and the client reads settings: nothing here imports the client
    from drtool.plugin.contract import RestoreContext

    from .discovery import ResourceType

Obj = dict[str, Any]
STORAGE_CLASSES, IMAGE_REGISTRIES, NAMESPACES, NODE_LABELS = (
    "storage-classes",
    "image-registries",
    "namespaces",
    "node-labels",
)
KINDS = (STORAGE_CLASSES, IMAGE_REGISTRIES, NAMESPACES, NODE_LABELS)
STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
NODE_LABEL_FIELDS = ("nodeSelector", "nodeLabels")  # pods and templates; Kueue ResourceFlavors


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One field one transform rewrote: ``transform`` (its kind), ``rule`` (``old -> new``), the object and field."""

    transform: str
    rule: str
    object: str
    field: str
    old: str
    new: str

    def line(self) -> str:
        return f"{self.transform} {self.rule}: {self.object} {self.field}: {self.old} -> {self.new}"


def _pairs(value: Any, kind: str) -> dict[str, str]:
    """A mapping, or ``"a=b,c=d"`` (the command line's form); each side non-empty, no rule mapping to itself."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        pairs = {str(k).strip(): str(v).strip() for k, v in value.items()}
    else:
        items = [i.partition("=") for i in str(value).split(",") if i.strip()] if isinstance(value, str) else []
        if not items or any(not sep for _, sep, _ in items):
            raise UsageError(f"transforms.{kind}: {value!r} is not a map", f"write {kind}: {{old: new, ...}}")
        pairs = {a.strip(): b.strip() for a, _, b in items}
    bad = [f"{k}={v}" for k, v in pairs.items() if not k or not v or k == v]
    if bad:
        raise UsageError(f"transforms.{kind}: rule {bad[0]} maps nothing to something else", "write old: new")
    return pairs


def _label(text: str, kind: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or "=" in value:
        raise UsageError(
            f"transforms.{kind}: {text!r} is not a node label",
            "write key=value: key=value (gpu.pool=h100: gpu.pool=a100)",
        )
    return key, value


@dataclasses.dataclass(frozen=True)
class Transforms:
    """The four maps; ``Transforms()`` rewrites nothing."""

    storage_classes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    image_registries: Mapping[str, str] = dataclasses.field(default_factory=dict)
    namespaces: Mapping[str, str] = dataclasses.field(default_factory=dict)
    node_labels: Mapping[tuple[str, str], tuple[str, str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any) -> Transforms:
        """A plan's ``transforms:`` block (the keys above), as the plan executor hands it to a plugin."""
        if not value:
            return cls()
        if not isinstance(value, Mapping):
            raise UsageError("transforms must be a map of storage-classes, image-registries, namespaces, node-labels")
        unknown = sorted(set(value) - set(KINDS))
        if unknown:
            raise UsageError(f"transforms: unknown transform {unknown[0]!r}", f"choose {', '.join(KINDS)}")
        namespaces = _pairs(value.get(NAMESPACES), NAMESPACES)
        if len(set(namespaces.values())) != len(namespaces):
            raise UsageError("transforms.namespaces maps two namespaces onto one", "each target namespace once")
        labels = {
            _label(k, NODE_LABELS): _label(v, NODE_LABELS)
            for k, v in _pairs(value.get(NODE_LABELS), NODE_LABELS).items()
        }
        return cls(
            _pairs(value.get(STORAGE_CLASSES), STORAGE_CLASSES),
            _pairs(value.get(IMAGE_REGISTRIES), IMAGE_REGISTRIES),
            namespaces,
            labels,
        )

    def merged(self, namespaces: Mapping[str, str], registries: Mapping[str, str]) -> Transforms:
        """With the kubernetes plugin's older options (``namespace_map``, ``image_registry_map``) under the plan's."""
        return dataclasses.replace(
            self, namespaces={**namespaces, **self.namespaces}, image_registries={**registries, **self.image_registries}
        )

    def __bool__(self) -> bool:
        return any((self.storage_classes, self.image_registries, self.namespaces, self.node_labels))

    def rules(self) -> list[tuple[str, str]]:
        """(transform, ``old=new``) of every rule, as ``Rewrite.rule`` names them."""
        return [
            *((STORAGE_CLASSES, f"{a} -> {b}") for a, b in self.storage_classes.items()),
            *((IMAGE_REGISTRIES, f"{a} -> {b}") for a, b in self.image_registries.items()),
            *((NAMESPACES, f"{a} -> {b}") for a, b in self.namespaces.items()),
            *((NODE_LABELS, f"{'='.join(a)} -> {'='.join(b)}") for a, b in self.node_labels.items()),
        ]

    def apply(self, obj: Obj, t: ResourceType, found: list[Rewrite] | None = None) -> Obj:
        """Rewrite ``obj`` in place for the target (and return it); each rewrite appended to ``found``."""
        if not self:
            return obj
        out: list[Rewrite] = [] if found is None else found
        who = f"{t.key} {object_key(obj)}"
        self._storage(obj, t, who, out)
        self._fields(obj, who, out)
        self._namespaces(obj, t, who, out)  # last: ``who`` names the object as the backup does
        return obj

    def _storage(self, obj: Obj, t: ResourceType, who: str, out: list[Rewrite]) -> None:
        if not self.storage_classes:
            return
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        claims: list[tuple[str, Obj]] = []
        if t.key in ("persistentvolumeclaims", "persistentvolumes"):
            claims.append(("spec", spec))
        for i, template in enumerate(spec.get("volumeClaimTemplates") or []):
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                claims.append((f"spec.volumeClaimTemplates[{i}].spec", template["spec"]))
        for where, claim in claims:
            old = claim.get("storageClassName")
            if old in self.storage_classes:
                claim["storageClassName"] = self.storage_classes[old]
                out.append(Rewrite(STORAGE_CLASSES, f"{old} -> {claim['storageClassName']}", who,
                                   f"{where}.storageClassName", old, claim["storageClassName"]))  # fmt: skip
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        old = annotations.get(STORAGE_CLASS_ANNOTATION)
        if old in self.storage_classes:
            annotations[STORAGE_CLASS_ANNOTATION] = new = self.storage_classes[old]
            out.append(Rewrite(STORAGE_CLASSES, f"{old} -> {new}", who,
                               f"metadata.annotations[{STORAGE_CLASS_ANNOTATION}]", old, new))  # fmt: skip

    def _fields(self, obj: Obj, who: str, out: list[Rewrite]) -> None:
        """Images and node labels, in one walk over the object (the restore's hot path)."""
        if not self.image_registries and not self.node_labels:
            return
        for holder, key, parent in _fields(obj, ""):
            value = holder[key]
            if key == "image" and self.image_registries and isinstance(value, str) and value and " " not in value:
                host = registry_host(value)
                if host in self.image_registries:
                    holder[key] = new = f"{self.image_registries[host]}/{_image_path(value, host)}"
                    rule = f"{host} -> {self.image_registries[host]}"
                    out.append(Rewrite(IMAGE_REGISTRIES, rule, who, _join(parent, key), value, new))
            elif key in NODE_LABEL_FIELDS and self.node_labels and isinstance(value, dict):
                holder[key] = self._map_selector(value, who, _join(parent, key), out)
            elif (
                key == "matchExpressions" and self.node_labels and "nodeAffinity" in parent and isinstance(value, list)
            ):
                for i, expr in enumerate(value):
                    if isinstance(expr, dict):
                        self._map_expression(expr, who, f"{_join(parent, key)}[{i}]", out)

    def _map_selector(self, selector: dict[str, Any], who: str, path: str, out: list[Rewrite]) -> dict[str, Any]:
        mapped: dict[str, Any] = {}
        for k, v in selector.items():
            new = self.node_labels.get((k, str(v)))
            if new is None:
                mapped.setdefault(k, v)
                continue
            mapped[new[0]] = new[1]
            rule = f"{k}={v} -> {'='.join(new)}"
            out.append(Rewrite(NODE_LABELS, rule, who, f"{path}[{k}]", f"{k}={v}", "=".join(new)))
        return mapped

    def _map_expression(self, expr: dict[str, Any], who: str, path: str, out: list[Rewrite]) -> None:
        """``{key, operator, values}``: rewritten when every value maps, and all onto one key."""
        key, values = expr.get("key"), expr.get("values") or []
        hits = [self.node_labels[(key, v)] for v in values if (key, v) in self.node_labels]
        if not hits or len({k for k, _ in hits}) != 1 or len(hits) != len(values):
            return
        old = f"{key} in {values}"
        expr["key"], expr["values"] = hits[0][0], [v for _, v in hits]
        for v, new in zip(values, hits, strict=True):
            out.append(
                Rewrite(
                    NODE_LABELS, f"{key}={v} -> {'='.join(new)}", who, path, old, f"{expr['key']} in {expr['values']}"
                )
            )

    def _namespaces(self, obj: Obj, t: ResourceType, who: str, out: list[Rewrite]) -> None:
        if not self.namespaces:
            return
        meta = obj.get("metadata") or {}
        before = [("metadata.namespace", meta.get("namespace"))]
        if t.key == "namespaces":
            before.append(("metadata.name", meta.get("name")))
        map_namespaces(obj, t, self.namespaces)
        for field, old in before:
            new = (obj.get("metadata") or {}).get(field.split(".")[1])
            if old != new:
                out.append(Rewrite(NAMESPACES, f"{old} -> {new}", who, field, str(old), str(new)))
        for i, subject in enumerate(obj.get("subjects") or []):
            origin = next((a for a, b in self.namespaces.items() if b == subject.get("namespace")), None)
            if origin is not None and t.resource in ("rolebindings", "clusterrolebindings"):
                out.append(Rewrite(NAMESPACES, f"{origin} -> {subject['namespace']}", who,
                                   f"subjects[{i}].namespace", origin, subject["namespace"]))  # fmt: skip


def _fields(value: Any, parent: str) -> Iterator[tuple[dict[str, Any], str, str]]:
    """(the mapping, key, the dotted path of the mapping) of every mapping entry in a nested object. A stack,
    not nested generators (the restore's hot path); a path is built only for what holds more (``_join`` makes
    an entry's own when it is rewritten)."""
    stack = [(value, parent)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                yield node, key, path
                if isinstance(item, dict | list):
                    stack.append((item, _join(path, key)))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node) if isinstance(item, dict | list))


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else str(key)


def _image_path(image: str, host: str) -> str:
    """The repository path (with tag and digest) of ``image`` under ``host``, Docker Hub's implicit parts added."""
    if image.startswith(f"{host}/"):
        return image[len(host) + 1 :]
    return image if "/" in image else f"library/{image}"  # only Docker Hub references omit the host


def unmatched(transforms: Transforms, rewrites: list[Rewrite]) -> list[str]:
    """The rules that rewrote nothing, as ``transform old -> new``: each one is a plan wrong about its backup."""
    used = {(r.transform, r.rule) for r in rewrites}
    return [f"{kind} {rule}" for kind, rule in transforms.rules() if (kind, rule) not in used]


def preview(ctx: RestoreContext, transforms: Transforms) -> list[Rewrite]:
    """Every rewrite ``transforms`` would make to one plugin's backup, read from the store, nothing written."""
    from .artifacts import records, types_in  # here: artifacts reads discovery, which imports the client

    found: list[Rewrite] = []
    if transforms:
        for t in types_in(ctx):
            for rec in records(ctx, t):
                transforms.apply(rec["object"], t, found)
    return found
