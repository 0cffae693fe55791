"""Which objects of a location form which checkpoint, and whether each checkpoint is complete.

A checkpoint is a directory holding an anchor: a DCP ``.metadata`` (or ``.metadata.tmp``, or ``.distcp``
shards), safetensors files or their index, or a completion marker; or a kubelet container checkpoint
archive on its own. Files belong to the deepest checkpoint directory above them. Directories with files
but no anchor are reported as incomplete ("no completion marker"). Completeness is judged from the
checkpoint's own structure (reading only metadata and headers, never tensor data), the way its reader
would: a DCP checkpoint whose ``.metadata`` names a shard that is missing or short is not loadable.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import posixpath
import re
import struct
from collections.abc import Iterable, Sequence

from drtool.errors import IntegrityError

from . import dcp
from .location import Location, ObjectStat

DEFAULT_MARKERS = ("COMPLETE", "_SUCCESS", "latest", "trainer_state.json")
CONTAINER_ARCHIVE = re.compile(
    r"^checkpoint-(?P<pod>.+)-(?P<container>[^-]+)-(?P<time>\d{4}-\d\d-\d\dT[0-9:.-]+Z?)\.tar$"
)
DCP_METADATA = ".metadata"
ST_INDEX = ".safetensors.index.json"
MAX_HEADER = 100 << 20  # safetensors' own limit on header size
# Hugging Face's sharded file names: the index naming every shard is written after the last of them
SHARD_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.safetensors$")
_STEP = re.compile(r"(\d+)$")
_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2}
_DTYPE_BYTES |= {"F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


@dataclasses.dataclass
class Checkpoint:
    name: str  # its directory (or archive) key relative to the location root
    kind: str  # dcp | safetensors | marker | container | unknown
    files: list[ObjectStat]
    complete: bool = False
    reason: str = ""
    commit: tuple[str, ...] = ()  # keys written last on restore, in this order
    run: str = ""
    step: int | None = None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def rel(self, key: str) -> str:
        """``key`` relative to the checkpoint's directory."""
        if self.kind == "container":
            return posixpath.basename(key)
        return key[len(self.name) + 1 :] if self.name else key


def _anchor_kind(filename: str, markers: Sequence[str]) -> str | None:
    if filename in (DCP_METADATA, DCP_METADATA + ".tmp") or filename.endswith(".distcp"):
        return "dcp"
    if filename.endswith(".safetensors") or filename.endswith(ST_INDEX):
        return "safetensors"
    if filename in markers:
        return "marker"
    return None


def group(objects: Iterable[ObjectStat], markers: Sequence[str] = DEFAULT_MARKERS) -> list[Checkpoint]:
    """Objects grouped into checkpoints (complete or not: ``check`` decides)."""
    archives: list[Checkpoint] = []
    rest: list[ObjectStat] = []
    kinds: dict[str, set[str]] = {}
    for obj in objects:
        base = posixpath.basename(obj.key)
        if CONTAINER_ARCHIVE.match(base):
            archives.append(Checkpoint(obj.key, "container", [obj], commit=()))
            continue
        rest.append(obj)
        kind = _anchor_kind(base, markers)
        if kind:
            kinds.setdefault(posixpath.dirname(obj.key), set()).add(kind)
    by_dir: dict[str, list[ObjectStat]] = {}
    for obj in rest:
        d = posixpath.dirname(obj.key)
        owner = next((a for a in _ancestors(d) if a in kinds), None)
        by_dir.setdefault(owner if owner is not None else d, []).append(obj)
    out = archives
    for d, files in sorted(by_dir.items()):
        found = kinds.get(d, set())
        kind = next((k for k in ("dcp", "safetensors", "marker") if k in found), "unknown")
        out.append(Checkpoint(d, kind, files))
    return sorted(out, key=lambda c: c.name)


def _ancestors(d: str) -> list[str]:
    out = [d]
    while d:
        d = posixpath.dirname(d)
        out.append(d)
    return out


def label(ck: Checkpoint, run: str | None) -> None:
    """Run and step for retention: the step is the trailing number of the directory name
    (``checkpoint-500``, ``global_step1000``); the run is the setting, else the parent directory."""
    base = posixpath.basename(ck.name.removesuffix(".tar"))
    m = _STEP.search(base) if ck.kind != "container" else None
    ck.step = int(m.group(1)) if m else None
    ck.run = run or posixpath.basename(posixpath.dirname(ck.name)) or "default"


def check(loc: Location, ck: Checkpoint, markers: Sequence[str] = DEFAULT_MARKERS) -> None:
    """Set ``complete``, ``reason`` and ``commit`` by the checkpoint's own rules."""
    names = {ck.rel(f.key): f for f in ck.files}
    try:
        if ck.kind == "dcp":
            _check_dcp(loc, ck, names)
        elif ck.kind == "safetensors":
            _check_safetensors(loc, ck, names)
        elif ck.kind == "container":
            _check_archive(loc, ck.files[0])
        elif ck.kind == "unknown":
            raise IntegrityError(f"no completion marker (one of {', '.join(markers)})")
        ck.commit = tuple(f"{ck.name}/{m}" for m in markers if m in names)
        if ck.kind == "dcp":
            ck.commit = (f"{ck.name}/{DCP_METADATA}", *ck.commit)
        elif ck.kind == "safetensors":
            ck.commit = tuple(f"{ck.name}/{n}" for n in sorted(names) if n.endswith(ST_INDEX)) + ck.commit
        ck.commit = tuple(k.lstrip("/") for k in ck.commit)
        ck.complete, ck.reason = True, ""
    except IntegrityError as exc:
        ck.complete, ck.reason = False, exc.message


def _check_dcp(loc: Location, ck: Checkpoint, names: dict[str, ObjectStat]) -> None:
    if DCP_METADATA + ".tmp" in names:
        raise IntegrityError(".metadata.tmp present: the save has not finished")
    meta = names.get(DCP_METADATA)
    if meta is None:
        raise IntegrityError(".metadata missing: the save has not finished")
    need = dcp.storage_extents(dcp.load_metadata(loc.read_range(meta.key, 0, meta.size)))
    for path, least in sorted(need.items()):
        have = names.get(path)
        if have is None:
            raise IntegrityError(f"shard {path} named in .metadata is missing")
        if have.size < least:
            raise IntegrityError(f"shard {path} is {have.size} bytes, .metadata needs at least {least}")


def _safetensors_header(loc: Location, obj: ObjectStat) -> dict[str, object]:
    """Parse one file's header and check the data size it declares against the file size."""
    if obj.size < 8:
        raise IntegrityError(f"{obj.key} is too short for a safetensors file")
    (n,) = struct.unpack("<Q", loc.read_range(obj.key, 0, 8))
    if n > MAX_HEADER or 8 + n > obj.size:
        raise IntegrityError(f"{obj.key} has an impossible header length {n}")
    try:
        header = json.loads(loc.read_range(obj.key, 8, n))
    except ValueError:
        raise IntegrityError(f"{obj.key}: header is not JSON (truncated or still being written)") from None
    if not isinstance(header, dict):
        raise IntegrityError(f"{obj.key}: header is not a JSON object")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, stop = info["data_offsets"]
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            width = _DTYPE_BYTES.get(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"{obj.key}: tensor {name} has a malformed header entry") from None
        if width is not None and stop - begin != count * width:
            raise IntegrityError(
                f"{obj.key}: tensor {name} spans {stop - begin} bytes, its shape needs {count * width}"
            )
        end = max(end, stop)
    if 8 + n + end != obj.size:
        raise IntegrityError(f"{obj.key} is {obj.size} bytes, its header describes {8 + n + end}")
    return header


def _check_safetensors(loc: Location, ck: Checkpoint, names: dict[str, ObjectStat]) -> None:
    indexes = [n for n in names if n.endswith(ST_INDEX)]
    shards = sorted(n for n in names if n.endswith(".safetensors"))
    tensors: dict[str, dict[str, object]] = {}
    for shard in shards:
        tensors[shard] = _safetensors_header(loc, names[shard])
    for index_name in indexes:
        obj = names[index_name]
        try:
            index = json.loads(loc.read_range(obj.key, 0, obj.size))
            weight_map = index["weight_map"]
            assert isinstance(weight_map, dict)
        except (ValueError, KeyError, TypeError, AssertionError):
            raise IntegrityError(f"{index_name} is not a safetensors index (no weight_map)") from None
        for tensor, filename in sorted(weight_map.items()):
            if filename not in tensors:
                raise IntegrityError(f"shard {filename} named in {index_name} is missing")
            if tensor not in tensors[filename]:
                raise IntegrityError(f"tensor {tensor} is not in {filename} as {index_name} says")
    if not shards:
        raise IntegrityError("an index but no .safetensors files")
    sharded = next((m for m in map(SHARD_NAME.search, shards) if m), None)
    if sharded and not indexes:
        of = int(sharded.group(2))
        raise IntegrityError(f"{len(shards)} of {of} shards and no index: the sharded save has not finished")


def _check_archive(loc: Location, obj: ObjectStat, max_members: int = 100_000) -> None:
    """Walk the tar's member headers (one small range read each, never the data): every header's checksum
    holds, every member's data lies inside the file, and the archive ends with its zero blocks."""
    pos = 0
    for _ in range(max_members):
        if pos + 1024 > obj.size:
            raise IntegrityError(f"archive ends at {obj.size} bytes, inside member data: truncated")
        head = loc.read_range(obj.key, pos, 512)
        if not head.strip(b"\0"):
            if loc.read_range(obj.key, pos + 512, 512).strip(b"\0"):
                raise IntegrityError("archive has a lone zero block: damaged")
            return
        if _tar_field(head[148:156]) != sum(head[:148]) + 8 * 32 + sum(head[156:]):
            raise IntegrityError(f"archive header at offset {pos} is damaged (checksum)")
        size = _tar_field(head[124:136])
        pos += 512 + -(-size // 512) * 512
    raise IntegrityError(f"archive has more than {max_members} members")


def _tar_field(raw: bytes) -> int:
    if raw[:1] == b"\x80":  # GNU base-256 for sizes over 8 GiB
        return int.from_bytes(raw[1:], "big")
    try:
        return int(raw.split(b"\0")[0].strip() or b"0", 8)
    except ValueError:
        return -1


def matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(posixpath.basename(name), p) for p in patterns)
