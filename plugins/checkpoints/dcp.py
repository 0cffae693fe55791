"""Reading a PyTorch Distributed Checkpoint's ``.metadata`` without trusting it.

``.metadata`` is a pickle (``torch.distributed.checkpoint.filesystem.FileSystemWriter.finish``), and
unpickling runs whatever callables the file names. A backup tool reads checkpoints written by any job in
the cluster, so it must not. This unpickler never imports anything: every global the file names must be
on a short allowlist of DCP metadata classes and torch value types, and each maps to an inert record
(a dtype becomes a string, ``torch.Size`` a tuple). Any other global, e.g. ``os.system``, rejects the file.
torch itself is not needed (nor installed) for this.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from drtool.errors import IntegrityError

_DCP = "torch.distributed.checkpoint"
_RECORDS = {
    f"{_DCP}.metadata": {
        "Metadata",
        "MetadataIndex",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    },
    f"{_DCP}.filesystem": {"_StorageInfo"},
    f"{_DCP}.planner": {"WriteItem", "ReadItem"},
}
_TORCH_VALUES = {
    # dtypes, layouts and memory formats pickle as plain globals of module torch
    "float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64", "int32", "int16", "int8",
    "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2", "strided", "sparse_coo",
    "contiguous_format",
}  # fmt: skip


class Record:
    """An inert stand-in for an allowed class: keeps constructor arguments and pickled state, runs nothing."""

    type_name = "record"
    args: tuple[Any, ...] = ()
    state: Any = None  # class defaults: NEWOBJ builds instances without calling __init__

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def field(self, name: str, default: Any = None) -> Any:
        """A dataclass field from the pickled state (a dict, or (None, slots) with __slots__)."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}
        return state.get(name, default) if isinstance(state, dict) else default


def _record_class(name: str) -> type[Record]:
    return type(name, (Record,), {"type_name": name})


_CLASSES = {(module, name): _record_class(name) for module, names in _RECORDS.items() for name in names}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _CLASSES:
            return _CLASSES[(module, name)]
        if module == "torch" and name == "Size":
            return tuple
        if module == "torch" and name in _TORCH_VALUES:
            return f"torch.{name}"
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        raise pickle.UnpicklingError(f"global {module}.{name} is not DCP metadata")


def load_metadata(data: bytes) -> Record:
    """The ``Metadata`` record of a ``.metadata`` file; IntegrityError if it is not plain DCP metadata."""
    try:
        meta = _Unpickler(io.BytesIO(data)).load()
    except Exception as exc:  # a hostile or damaged pickle can fail in many ways; all mean "not usable"
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IntegrityError(f"DCP metadata rejected: {why}") from None
    if not (isinstance(meta, Record) and meta.type_name == "Metadata"):
        raise IntegrityError("DCP metadata rejected: the pickle does not hold a Metadata object")
    return meta


def storage_extents(meta: Record) -> dict[str, int]:
    """For each ``.distcp`` file the metadata names, the least size it must have (max offset + length)."""
    storage = meta.field("storage_data")
    if not isinstance(storage, dict):
        raise IntegrityError("DCP metadata has no storage_data (not written by FileSystemWriter)")
    need: dict[str, int] = {}
    for info in storage.values():
        if not isinstance(info, Record):
            raise IntegrityError("DCP metadata has a storage entry of an unknown shape")
        path, offset, length = info.field("relative_path"), info.field("offset"), info.field("length")
        if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(length, int):
            raise IntegrityError("DCP metadata has a storage entry without relative_path/offset/length")
        if "/" in path or path.startswith("."):
            raise IntegrityError(f"DCP metadata names a file outside its directory: {path!r}")
        need[path] = max(need.get(path, 0), offset + length)
    return need
