"""Real sample checkpoints for the lab, the tests and the benchmark, written through a ``put(key, bytes)``.

safetensors files come from the ``safetensors`` package itself. PyTorch DCP checkpoints are written
without torch (its PyPI wheels need the CUDA libraries to import, GBs that CI cannot afford): the layout
is FileSystemWriter's — ``__<rank>_0.distcp`` shards and a pickled ``Metadata`` in ``.metadata`` — and the
pickle names the same classes, fields and torch globals as torch 2.15's
``torch/distributed/checkpoint/metadata.py`` and ``filesystem.py``, so drtool's reader sees what it would
see from torch. Tensor payloads are the arrays' raw bytes (torch stores its own serialisation there),
which is all a backup checks: the extents ``.metadata`` names.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
from collections.abc import Callable, Mapping
from typing import Any

Put = Callable[[str, bytes], None]
_DCP = "torch.distributed.checkpoint"


class _DType:
    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> str:
        return self.name  # like torch.dtype: a global of module torch


class _Size(tuple):  # a stand-in for torch.Size, pickled by value
    def __reduce__(self) -> tuple[Any, ...]:
        return (_Size, (tuple(self),))


class _MemFormat:
    def __init__(self, value: int) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_MemFormat, (self.value,))  # how an Enum member pickles


@dataclasses.dataclass
class _ChunkStorageMetadata:
    offsets: _Size
    sizes: _Size


@dataclasses.dataclass
class _TensorProperties:
    dtype: _DType

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.dtype, _DType("strided"), False, _MemFormat(0), False, None)


@dataclasses.dataclass
class _TensorStorageMetadata:
    properties: _TensorProperties
    size: _Size
    chunks: list[_ChunkStorageMetadata]


@dataclasses.dataclass(frozen=True)
class _MetadataIndex:
    fqn: str
    offset: _Size | None = None
    index: int | None = None


@dataclasses.dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclasses.dataclass
class _Metadata:
    state_dict_metadata: dict[str, Any]
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Any = None
    version: str | None = "1.0.0"


_NAMES: dict[Any, tuple[str, str]] = {
    _Size: ("torch", "Size"),
    _MemFormat: (f"{_DCP}.metadata", "_MEM_FORMAT_ENCODING"),
    _ChunkStorageMetadata: (f"{_DCP}.metadata", "ChunkStorageMetadata"),
    _TensorProperties: (f"{_DCP}.metadata", "TensorProperties"),
    _TensorStorageMetadata: (f"{_DCP}.metadata", "TensorStorageMetadata"),
    _MetadataIndex: (f"{_DCP}.metadata", "MetadataIndex"),
    _Metadata: (f"{_DCP}.metadata", "Metadata"),
    _StorageInfo: (f"{_DCP}.filesystem", "_StorageInfo"),
}


class _Pickler(pickle._Pickler):  # the pure-Python pickler lets us name globals that are not importable here
    def save_global(self, obj: Any, name: str | None = None) -> None:
        module, qualname = ("torch", obj.name) if isinstance(obj, _DType) else _NAMES[obj]
        self.save(module)
        self.save(qualname)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)


_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "int64": "int64", "uint8": "uint8"}


def dcp_metadata(tensors: Mapping[str, Any], ranks: int) -> tuple[bytes, dict[str, bytes]]:
    """``.metadata`` bytes and the shard files for numpy arrays spread over ``ranks`` writers."""
    shards: dict[str, io.BytesIO] = {f"__{r}_0.distcp": io.BytesIO() for r in range(ranks)}
    state: dict[str, Any] = {}
    storage: dict[Any, Any] = {}
    for i, (fqn, array) in enumerate(sorted(tensors.items())):
        path = f"__{i % ranks}_0.distcp"
        offset = shards[path].tell()
        shards[path].write(array.tobytes())
        zeros = _Size([0] * array.ndim)
        props = _TensorProperties(_DType(_TORCH_DTYPES[str(array.dtype)]))
        state[fqn] = _TensorStorageMetadata(
            props, _Size(array.shape), [_ChunkStorageMetadata(zeros, _Size(array.shape))]
        )
        storage[_MetadataIndex(fqn, zeros, 0)] = _StorageInfo(path, offset, array.nbytes)
    buf = io.BytesIO()
    _Pickler(buf, protocol=4).dump(_Metadata(state, storage_data=storage))
    return buf.getvalue(), {p: b.getvalue() for p, b in shards.items()}


def write_dcp(put: Put, prefix: str, tensors: Mapping[str, Any], ranks: int = 2, finished: bool = True) -> None:
    """A DCP checkpoint under ``prefix``; ``finished=False`` leaves ``.metadata.tmp``, as a crashed save does."""
    metadata, shards = dcp_metadata(tensors, ranks)
    for path, data in shards.items():
        put(f"{prefix}/{path}", data)
    put(f"{prefix}/.metadata{'' if finished else '.tmp'}", metadata)


def safetensors_bytes(tensors: Mapping[str, Any]) -> bytes:
    from safetensors.numpy import save

    return save(dict(tensors))


def write_safetensors(put: Put, prefix: str, shards: list[Mapping[str, Any]], with_index: bool = True) -> None:
    """Hugging Face sharded weights: ``model-0000i-of-0000n.safetensors`` plus the index, index last."""
    n = len(shards)
    weight_map: dict[str, str] = {}
    total = 0
    for i, tensors in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{n:05d}.safetensors"
        put(f"{prefix}/{fname}", safetensors_bytes(tensors))
        weight_map |= {t: fname for t in tensors}
        total += sum(a.nbytes for a in tensors.values())
    if with_index:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        put(f"{prefix}/model.safetensors.index.json", json.dumps(index, indent=2).encode())


def container_archive(files: Mapping[str, bytes]) -> bytes:
    """A tar like the kubelet's checkpoint archive (checkpointctl layout: config.dump, checkpoint/...)."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def random_tensors(rng: Any, count: int, shape: tuple[int, ...], prefix: str = "layer") -> dict[str, Any]:
    import numpy as np

    return {f"{prefix}.{i}.weight": rng.standard_normal(shape).astype(np.float32) for i in range(count)}
