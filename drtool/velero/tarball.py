"""Reading a Velero backup tarball (``<backup>.tar.gz``): one JSON file per object, grouped by type.

Velero v1.18 (``pkg/backup/item_backupper.go``, ``pkg/archive/filesystem.go``) writes every object it
backed up as ``resources/<resource>[.<group>]/{cluster|namespaces/<ns>}/<name>.json``, in the version the
API server prefers, and the same bytes again under ``resources/<resource.group>/<version>-preferredversion/``
(with the ``EnableAPIGroupVersions`` feature, each other served version under ``<version>/`` too);
``metadata/version`` holds the format version. Only the unversioned copy is read, the one Velero's own
restore reads by default; the versioned copies are counted, not compared.

Velero seals nothing: the gzip CRC-32 is the only integrity check it writes. So every check here is one a
truncated or damaged file fails, not one an attacker with write access to the bucket cannot pass (a
consistent rewrite of tarball, resource list and metadata is accepted: docs/velero.md says so). The checks:
the whole gzip stream decompresses and its CRC and length agree; the tar structure is read to its end marker
and nothing but zero padding follows it (Python's tarfile would otherwise stop silently at a damaged header);
every entry is a regular file at a path of the layout above; every file is a JSON object whose kind, API group,
namespace and name agree with its path.
"""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
import zlib
from typing import Any

from drtool.errors import IntegrityError

Obj = dict[str, Any]
MAX_TAR_BYTES = 8 * 1024**3  # decompressed: a tarball that inflates beyond this is refused, not held
FORMAT_FILE = "metadata/version"
SCOPES = ("cluster", "namespaces")


@dataclasses.dataclass
class Resource:
    """The objects of one type (``resource.group``, Velero's directory name) in the tarball."""

    resource: str
    group: str
    namespaced: bool
    items: list[Obj] = dataclasses.field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclasses.dataclass
class Tarball:
    format_version: str
    resources: dict[str, Resource]  # by key, in the tarball's order of first appearance
    versioned_copies: int  # files under a version folder: copies of objects read unversioned

    @property
    def objects(self) -> int:
        return sum(len(r.items) for r in self.resources.values())

    def listed(self) -> set[tuple[str, str]]:
        """``(apiVersion/Kind, namespace/name)`` of every object, as Velero's resource list names them."""
        out = set()
        for r in self.resources.values():
            for obj in r.items:
                meta = obj["metadata"]
                entry = f"{meta['namespace']}/{meta['name']}" if r.namespaced else meta["name"]
                out.add((f"{obj['apiVersion']}/{obj['kind']}", entry))
        return out


def gunzip(data: bytes, what: str, limit: int = MAX_TAR_BYTES) -> bytes:
    """The whole gzip stream of ``data``, its CRC-32 and length checked; damaged or truncated: IntegrityError."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = bytearray()
    pending = data
    try:
        while pending:
            out += inflater.decompress(pending, limit + 1 - len(out))
            if len(out) > limit:
                raise IntegrityError(f"{what} inflates beyond {limit} bytes", "not a Velero backup tarball")
            pending = inflater.unconsumed_tail
    except zlib.error as exc:
        raise IntegrityError(f"{what} is damaged: gzip says {exc}", "copy it again from the bucket") from None
    if not inflater.eof:
        raise IntegrityError(f"{what} is truncated: the gzip stream ends early", "copy it again from the bucket")
    if inflater.unused_data:
        raise IntegrityError(f"{what} has {len(inflater.unused_data)} bytes after its gzip stream")
    return bytes(out)


def parse(data: bytes, what: str) -> Tarball:
    """Every object of a Velero backup tarball (``data``: the ``.tar.gz`` bytes; ``what`` names it in errors)."""
    raw = gunzip(data, what)
    found = Tarball("", {}, 0)
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for member in tar:
                _take(found, tar, member, what)
            end = tar.offset
    except (tarfile.TarError, EOFError) as exc:
        raise IntegrityError(f"{what} is damaged: tar says {exc}", "copy it again from the bucket") from None
    if raw[end:].strip(b"\0"):
        raise IntegrityError(f"{what} is damaged: the tar stops at byte {end} of {len(raw)} (a damaged header)")
    if not found.format_version:
        raise IntegrityError(f"{what} has no {FORMAT_FILE}", "not a Velero backup tarball")
    return found


def _take(found: Tarball, tar: tarfile.TarFile, member: tarfile.TarInfo, what: str) -> None:
    name = member.name
    if member.isdir():
        return
    if not member.isreg():
        raise IntegrityError(f"{what}: entry {name!r} is not a regular file")
    body = tar.extractfile(member).read()  # type: ignore[union-attr]
    if name == FORMAT_FILE:
        found.format_version = body.decode(errors="replace").strip()
        return
    parts = name.split("/")
    if parts[0] != "resources" or len(parts) < 4 or not parts[-1].endswith(".json"):
        raise IntegrityError(f"{what}: unexpected entry {name!r}", "not a Velero backup tarball")
    if parts[2] not in SCOPES:
        found.versioned_copies += 1  # resources/<gr>/<version>[-preferredversion]/...
        return
    _object(found, parts, body, f"{what}: {name}")


def _object(found: Tarball, parts: list[str], body: bytes, where: str) -> None:
    """One unversioned object file: ``resources/<gr>/cluster/<name>.json`` or ``.../namespaces/<ns>/<name>.json``."""
    gr, scope = parts[1], parts[2]
    namespaced = scope == "namespaces"
    if len(parts) != (5 if namespaced else 4):
        raise IntegrityError(f"{where}: not at resources/<type>/cluster/<name>.json or .../namespaces/<ns>/<name>.json")
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{where} is not JSON: {str(exc).splitlines()[0]}") from None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not obj.get("kind") or not isinstance(obj.get("apiVersion"), str):
        raise IntegrityError(f"{where} is not a Kubernetes object (apiVersion, kind, metadata)")
    resource, _, group = gr.partition(".")
    api_group = obj["apiVersion"].rpartition("/")[0]
    if api_group != group:
        raise IntegrityError(f"{where} holds an object of API group {api_group!r}, not {group!r}")
    namespace = parts[3] if namespaced else None
    if meta.get("name") != parts[-1].removesuffix(".json") or meta.get("namespace") != namespace:
        raise IntegrityError(f"{where} holds {meta.get('namespace')}/{meta.get('name')}, not the object its path names")
    entry = found.resources.setdefault(gr, Resource(resource, group, namespaced))
    if entry.namespaced != namespaced:
        raise IntegrityError(f"{where}: {gr} appears both cluster-scoped and namespaced")
    entry.items.append(obj)
