"""A deterministic "etcd-like" input: a bbolt-style file of 4 KiB pages holding Kubernetes-shaped objects.

The file mimics what `etcdctl snapshot save` streams (etcd's bbolt database), closely enough that chunking,
compression and deduplication see the same kind of bytes:

- **Pages** (bbolt layout, little-endian): two meta pages (magic ``0xED0CDAED``, version 2, page size 4096,
  FNV-1a checksum), leaf pages filled to 90 % (etcd's fill percent for sequential writes) with the unused tail
  zeroed, branch pages indexing every ~100 leaves, overflow pages for records larger than a page, a root
  bucket page naming the ``key`` bucket, a freelist page, and *free pages*: stale copies of recently
  written leaves (copy-on-write leaves old page versions behind; about 8 % of pages) plus zeroed padding.
- **Records** (etcd's ``key`` bucket): the key is the 17-byte revision ``>Q main || "_" || >Q sub``; the value
  is an ``mvccpb.KeyValue`` protobuf (``/registry/...`` key, create/mod revision, version, lease, value).
- **Objects** (the value): built-in kinds in Kubernetes' protobuf envelope (``k8s\\0`` + runtime.Unknown
  with positional fields, so field *names* are absent, but map keys such as labels, annotations and the
  ``managedFields`` JSON are present); custom resources as compact JSON (as the API server stores them).
  Mix by record: events 25 %, pods 20 %, leases 15 %, configmaps 15 %, custom resources 15 % and secrets 10 %
  (half of them encrypted at rest: ``k8s:enc:aescbc:v1:key1:`` + random bytes).
- **History**: 40 % of records are new revisions of an existing key (a renewed lease, a pod changing phase,
  an event counted again), so nearby pages hold near-duplicates, as in a real etcd before compaction.
- **Randomness**: uids, tokens, certificates and payloads are random (base64 in JSON, raw bytes in
  protobuf), so the file compresses (zstd -3 ≈ 3.6:1) but far from trivially.

Everything derives from ``random.Random(seed)``: the same size and seed give the same bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

PAGE = 4096
FILL = 0.9
BRANCH_FANOUT = 100
TX_RECORDS = 200  # records per write transaction (etcd commits a batch every 100 ms)
_MIN_KEYS = 2
STALE_PAGE_RATE = 0.08
UPDATE_RATE = 0.4
MAGIC = 0xED0CDAED
BRANCH_FLAG, LEAF_FLAG, META_FLAG, FREELIST_FLAG = 0x01, 0x02, 0x04, 0x10
BUCKET_LEAF_FLAG = 0x01

_HEADER = struct.Struct("<QHHI")  # page id, flags, element count, overflow pages
_LEAF_ELEM = struct.Struct("<IIII")  # flags, pos (relative to this element), key size, value size
_BRANCH_ELEM = struct.Struct("<IIQ")  # pos, key size, child page id
_META = struct.Struct("<IIIIQQQQQ")  # magic, version, page size, flags, root, sequence, freelist, pgid, txid
_EPOCH = dt.datetime(2026, 1, 15, tzinfo=dt.UTC)
_KINDS = ("events", "pods", "leases", "configmaps", "crs", "secrets")
_KIND_WEIGHTS = (25, 20, 15, 15, 15, 10)
_RECENT = 2000  # objects per kind remembered for updates


class Map(dict[str, Any]):
    """A protobuf map field: encoded as key/value entries, so its keys appear in the bytes."""


# --- protobuf-ish encoding -----------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _pb_field(num: int, value: Any) -> bytes:
    if isinstance(value, bool | int):
        return _varint(num << 3) + _varint(int(value))
    if isinstance(value, str):
        return _len_field(num, value.encode())
    if isinstance(value, bytes):
        return _len_field(num, value)
    if isinstance(value, Map):
        return b"".join(_len_field(num, _pb_field(1, k) + _pb_field(2, v)) for k, v in value.items())
    if isinstance(value, dict):
        return _len_field(num, pb_message(value))
    if isinstance(value, list):
        return b"".join(_pb_field(num, item) for item in value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def pb_message(fields: dict[str, Any]) -> bytes:
    """Encode a dict as a message whose field numbers are the keys' positions (names are not encoded)."""
    return b"".join(_pb_field(i, v) for i, v in enumerate(fields.values(), 1) if v is not None)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode_object(obj: dict[str, Any]) -> bytes:
    """Custom resources as compact JSON; built-in kinds in the ``k8s\\0`` protobuf envelope."""
    if obj["kind"].endswith("CR"):
        return json.dumps(obj, separators=(",", ":"), default=_json_default).encode()
    type_meta = pb_message({"apiVersion": obj["apiVersion"], "kind": obj["kind"]})
    raw = pb_message({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    return b"k8s\x00" + _len_field(1, type_meta) + _len_field(2, raw) + _len_field(3, b"") + _len_field(4, b"")


# --- Kubernetes-shaped objects -------------------------------------------------------------------


class ObjectFactory:
    """Makes new objects and new versions of earlier ones, all from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.revision = 1
        self.serial = 0

    def timestamp(self) -> str:
        return (_EPOCH + dt.timedelta(milliseconds=50 * self.revision)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def b64(self, n: int) -> str:
        return base64.b64encode(self.rng.randbytes(n)).decode()

    def namespace(self) -> str:
        return f"ns-{min(int(self.rng.paretovariate(1.2)) - 1, 79)}"

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def metadata(self, name: str, namespace: str, app: str, extra_labels: int = 2) -> dict[str, Any]:
        labels = Map({"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "ml-platform"})
        for i in range(extra_labels):
            labels[f"team.example.com/label-{i}"] = f"value-{self.rng.randrange(20)}"
        return {
            "name": name,
            "generateName": None,
            "namespace": namespace,
            "selfLink": None,
            "uid": self.uid(),
            "resourceVersion": str(self.revision),
            "generation": 1,
            "creationTimestamp": self.timestamp(),
            "labels": labels,
            "annotations": Map({"example.com/owner": f"user-{self.rng.randrange(500)}@example.com"}),
            "managedFields": [],
        }

    def managed_fields(self, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        """A managedFields entry: the JSON set of field paths, which repeats the object's field names."""
        labels = {".": {}, **{f"f:{k}": {} for k in obj["metadata"]["labels"]}}
        fields: dict[str, Any] = {"f:metadata": {"f:labels": labels}}
        for section in ("data", "spec", "status"):
            value = obj.get(section)
            if isinstance(value, dict):
                fields[f"f:{section}"] = {".": {}, **{f"f:{k}": {} for k in value}}
        return {
            "manager": manager,
            "operation": "Update",
            "apiVersion": obj["apiVersion"],
            "time": self.timestamp(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"raw": json.dumps(fields, separators=(",", ":"))},
        }

    def touch(self, obj: dict[str, Any], manager: str) -> None:
        obj["metadata"]["resourceVersion"] = str(self.revision)
        obj["metadata"]["managedFields"] = [self.managed_fields(obj, manager)]

    # one function per kind: new object, and the change a later revision makes

    def event(self) -> dict[str, Any]:
        ns = self.namespace()
        pod = f"trainer-{self.rng.randrange(3000)}-{self.rng.getrandbits(20):05x}"
        reason, message = self.rng.choice(
            (
                (
                    "Pulled",
                    f'Successfully pulled image "registry.example.com/{ns}/trainer:v1.{self.rng.randrange(40)}.0" '
                    f"in {self.rng.uniform(0.5, 90):.3f}s",
                ),
                ("Scheduled", f"Successfully assigned {ns}/{pod} to gpu-node-{self.rng.randrange(64)}"),
                ("BackOff", "Back-off restarting failed container trainer in pod " + pod),
                ("Created", "Created container trainer"),
            )
        )
        meta = self.metadata(f"{pod}.{self.rng.getrandbits(64):x}", ns, "trainer", 0)
        source = {"component": "kubelet", "host": f"gpu-node-{self.rng.randrange(64)}"}
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta,
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod, "uid": self.uid(), "apiVersion": "v1"},
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": self.timestamp(),
            "lastTimestamp": self.timestamp(),
            "count": 1,
            "type": "Normal",
        }

    def update_event(self, obj: dict[str, Any]) -> None:
        obj["count"] += 1
        obj["lastTimestamp"] = self.timestamp()

    def lease(self) -> dict[str, Any]:
        node = f"gpu-node-{self.rng.randrange(400)}"
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self.metadata(node, "kube-node-lease", "kubelet", 0),
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": self.timestamp()},
        }

    def update_lease(self, obj: dict[str, Any]) -> None:
        obj["spec"]["renewTime"] = self.timestamp()

    def configmap(self) -> dict[str, Any]:
        ns = self.namespace()
        data = Map()
        for i in range(self.rng.randrange(1, 6)):
            lines = [
                f"{k}_{j} = {self.rng.choice(('true', 'false', str(self.rng.randrange(10**6)), self.b64(12)))}"
                for j, k in enumerate(
                    self.rng.choices(
                        ("batch_size", "learning_rate", "endpoint", "replicas", "timeout", "feature_flag"),
                        k=self.rng.randrange(5, 60),
                    )
                )
            ]
            data[f"config-{i}.ini"] = "[main]\n" + "\n".join(lines) + "\n"
        if self.rng.random() < 0.35:
            data["model.bin.b64"] = self.b64(self.rng.randrange(256, 6000))
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.metadata(self.name("cm"), ns, "trainer"),
            "data": data,
        }
        self.touch(obj, "kubectl-client-side-apply")
        return obj

    def update_configmap(self, obj: dict[str, Any]) -> None:
        key = self.rng.choice(list(obj["data"]))
        obj["data"][key] = obj["data"][key].replace("true", "false", 1) + f"# rev {self.revision}\n"

    def secret(self) -> dict[str, Any]:
        meta = self.metadata(self.name("secret"), self.namespace(), "trainer")
        data = Map(
            {
                "tls.crt": self.rng.randbytes(self.rng.randrange(900, 2000)),
                "tls.key": self.rng.randbytes(self.rng.randrange(200, 1700)),
                "token": self.rng.randbytes(32),
            }
        )
        obj = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data, "type": "kubernetes.io/tls"}
        self.touch(obj, "cert-manager")
        return obj

    def update_secret(self, obj: dict[str, Any]) -> None:
        obj["data"]["token"] = self.rng.randbytes(32)

    def pod(self) -> dict[str, Any]:
        ns = self.namespace()
        name = f"trainer-{self.rng.randrange(3000)}-{self.rng.getrandbits(20):05x}"
        containers = [
            {
                "name": f"worker-{i}",
                "image": f"registry.example.com/{ns}/trainer:v1.{self.rng.randrange(40)}.0",
                "command": ["python", "-m", "train", f"--shard={i}"],
                "env": [
                    {"name": f"TRAIN_{k.upper()}", "value": str(self.rng.randrange(10**4))}
                    for k in ("epochs", "batch", "workers", "seed", "lr_milli", "warmup")
                ],
                "resources": {
                    "limits": Map({"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}),
                    "requests": Map({"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}),
                },
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {
                        "name": "kube-api-access",
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "readOnly": True,
                    },
                ],
            }
            for i in range(self.rng.randrange(1, 4))
        ]
        meta = self.metadata(name, ns, "trainer", 4)
        meta["annotations"]["checksum/config"] = self.b64(32)
        meta["annotations"]["example.com/launch-token"] = self.b64(self.rng.randrange(64, 512))
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "containers": containers,
                "restartPolicy": "Never",
                "nodeName": f"gpu-node-{self.rng.randrange(400)}",
                "serviceAccountName": "trainer",
                "schedulerName": "default-scheduler",
            },
            "status": {"phase": "Pending", "conditions": [], "podIP": None, "startTime": self.timestamp()},
        }
        self.touch(obj, "kube-scheduler")
        return obj

    def update_pod(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"]["checksum/config"] = self.b64(32)
        status = obj["status"]
        status["phase"] = self.rng.choice(("Running", "Succeeded", "Failed"))
        status["podIP"] = f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{self.rng.randrange(256)}"
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": self.timestamp()}
        status["conditions"] = [*status["conditions"][-3:], ready]
        self.touch(obj, "kubelet")

    def custom_resource(self) -> dict[str, Any]:
        ns = self.namespace()
        group, kind = self.rng.choice(
            (
                ("kubeflow.org/v1", "NotebookCR"),
                ("ray.io/v1", "RayClusterCR"),
                ("serving.kserve.io/v1beta1", "InferenceServiceCR"),
            )
        )
        spec = {
            "replicas": self.rng.randrange(1, 9),
            "image": f"registry.example.com/{ns}/serve:v2.{self.rng.randrange(30)}",
            "resources": {"limits": {"nvidia.com/gpu": str(self.rng.randrange(1, 9))}},
            "storageUri": f"s3://models-{ns}/{self.uid()}/model",
            "caBundle": self.b64(self.rng.randrange(600, 1400)),
        }
        meta = self.metadata(self.name(kind.lower()[:-2]), ns, "serving")
        obj = {
            "apiVersion": group,
            "kind": kind,
            "metadata": meta,
            "spec": spec,
            "status": {"state": "Pending", "observedGeneration": 1},
        }
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
            {"apiVersion": group, "kind": kind, "spec": spec}
        )
        self.touch(obj, "kubectl-client-side-apply")
        return obj

    def update_custom_resource(self, obj: dict[str, Any]) -> None:
        obj["status"] = {
            "state": self.rng.choice(("Ready", "Progressing", "Degraded")),
            "observedGeneration": obj["status"]["observedGeneration"] + 1,
            "lastUpdate": self.timestamp(),
        }
        self.touch(obj, "controller")


def _registry_key(obj: dict[str, Any]) -> str:
    resource = {"Event": "events", "Lease": "leases", "ConfigMap": "configmaps", "Secret": "secrets", "Pod": "pods"}
    meta = obj["metadata"]
    if obj["kind"] in resource:
        return f"/registry/{resource[obj['kind']]}/{meta['namespace']}/{meta['name']}"
    group = obj["apiVersion"].split("/")[0]
    return f"/registry/{group}/{obj['kind'][:-2].lower()}s/{meta['namespace']}/{meta['name']}"


def _encrypted(rng: random.Random, plain: bytes) -> bytes:
    """What a Secret looks like in etcd with encryption at rest: a prefix, then ciphertext-sized random bytes."""
    return b"k8s:enc:aescbc:v1:key1:" + rng.randbytes(16 + (len(plain) // 16 + 1) * 16)


def records(seed: int) -> Iterator[tuple[bytes, bytes]]:
    """Endless (revision key, mvccpb.KeyValue) pairs, in revision order, as etcd's ``key`` bucket holds them."""
    rng = random.Random(seed)
    factory = ObjectFactory(rng)
    makers = {
        "events": (factory.event, factory.update_event),
        "pods": (factory.pod, factory.update_pod),
        "leases": (factory.lease, factory.update_lease),
        "configmaps": (factory.configmap, factory.update_configmap),
        "crs": (factory.custom_resource, factory.update_custom_resource),
        "secrets": (factory.secret, factory.update_secret),
    }
    recent: dict[str, list[tuple[dict[str, Any], int, int]]] = {k: [] for k in _KINDS}
    while True:
        kind = rng.choices(_KINDS, _KIND_WEIGHTS)[0]
        make, update = makers[kind]
        pool = recent[kind]
        if pool and rng.random() < UPDATE_RATE:
            index = rng.randrange(len(pool))
            obj, created, version = pool[index]
            update(obj)
            pool[index] = (obj, created, version + 1)
        else:
            obj, created, version = make(), factory.revision, 1
            pool.append((obj, created, version))
            if len(pool) > _RECENT:
                pool.pop(0)
        value = encode_object(obj)
        if kind == "secrets" and rng.random() < 0.5:
            value = _encrypted(rng, value)
        kv = pb_message(
            {
                "key": _registry_key(obj),
                "create_revision": created,
                "mod_revision": factory.revision,
                "version": version,
                "value": value,
                "lease": rng.getrandbits(62) if kind == "events" else None,
            }
        )
        yield struct.pack(">Q", factory.revision) + b"_" + struct.pack(">Q", 0), kv
        factory.revision += 1


# --- bbolt pages ---------------------------------------------------------------------------------


def _pages_for(size: int) -> int:
    return max(1, math.ceil(size / PAGE))


def _leaf_size(elems: list[tuple[bytes, bytes]]) -> int:
    return _HEADER.size + sum(_LEAF_ELEM.size + len(k) + len(v) for k, v in elems)


def leaf_page(pgid: int, elems: list[tuple[bytes, bytes]], flags: int = 0) -> bytes:
    """A leaf node image (with overflow pages if it is larger than a page), tail zeroed."""
    count = len(elems)
    heads, data = bytearray(), bytearray()
    data_start = _HEADER.size + count * _LEAF_ELEM.size
    for i, (key, value) in enumerate(elems):
        pos = data_start + len(data) - (_HEADER.size + i * _LEAF_ELEM.size)
        heads += _LEAF_ELEM.pack(flags, pos, len(key), len(value))
        data += key + value
    pages = _pages_for(data_start + len(data))
    body = _HEADER.pack(pgid, LEAF_FLAG, count, pages - 1) + heads + data
    return bytes(body) + bytes(pages * PAGE - len(body))


def branch_page(pgid: int, children: list[tuple[bytes, int]]) -> bytes:
    count = len(children)
    heads, data = bytearray(), bytearray()
    data_start = _HEADER.size + count * _BRANCH_ELEM.size
    for i, (key, child) in enumerate(children):
        pos = data_start + len(data) - (_HEADER.size + i * _BRANCH_ELEM.size)
        heads += _BRANCH_ELEM.pack(pos, len(key), child)
        data += key
    pages = _pages_for(data_start + len(data))
    body = _HEADER.pack(pgid, BRANCH_FLAG, count, pages - 1) + heads + data
    return bytes(body) + bytes(pages * PAGE - len(body))


def freelist_page(pgid: int, free_ids: list[int], pages: int) -> bytes:
    ids = sorted(free_ids)
    if len(ids) >= 0xFFFF:  # bbolt's overflow convention: the real count is the first element
        body = _HEADER.pack(pgid, FREELIST_FLAG, 0xFFFF, pages - 1) + struct.pack("<Q", len(ids))
    else:
        body = _HEADER.pack(pgid, FREELIST_FLAG, len(ids), pages - 1)
    body += struct.pack(f"<{len(ids)}Q", *ids)
    if len(body) > pages * PAGE:
        raise ValueError("freelist does not fit its pages")
    return body + bytes(pages * PAGE - len(body))


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def meta_page(pgid: int, root: int, freelist: int, high_water: int, txid: int) -> bytes:
    meta = _META.pack(MAGIC, 2, PAGE, 0, root, 0, freelist, high_water, txid)
    body = _HEADER.pack(pgid, META_FLAG, 0, 0) + meta + struct.pack("<Q", _fnv1a64(meta))
    return body + bytes(PAGE - len(body))


class _BoltWriter:
    """Appends pages to the file and remembers what the tail (index, freelist, meta) must describe."""

    def __init__(self, out: BinaryIO, total_pages: int, rng: random.Random) -> None:
        self.out = out
        self.total_pages = total_pages
        self.rng = rng
        self.next_id = 2  # pages 0 and 1 are the meta pages, written last
        self.free: list[int] = []
        self.recent_leaves: list[bytes] = []
        self.index: list[tuple[bytes, int]] = []  # (first key, page id) of every leaf
        self.branches: list[tuple[bytes, int]] = []  # first level of branch pages
        out.write(bytes(2 * PAGE))

    def _append(self, image: bytes) -> int:
        pgid = self.next_id
        self.out.write(image)
        self.next_id += len(image) // PAGE
        return pgid

    def add_leaf(self, elems: list[tuple[bytes, bytes]]) -> None:
        pgid = self.next_id
        image = leaf_page(pgid, elems)
        self._append(image)
        self.index.append((elems[0][0], pgid))
        self.recent_leaves = [*self.recent_leaves[-63:], image[:PAGE]]
        if len(self.index) % BRANCH_FANOUT == 0:
            children = self.index[-BRANCH_FANOUT:]
            self.branches.append((children[0][0], self._append(branch_page(self.next_id, children))))
        if self.rng.random() < STALE_PAGE_RATE:  # an old copy of a recent leaf, left behind by copy-on-write
            self.free.append(self._append(self.rng.choice(self.recent_leaves)))

    def finish(self, txid: int) -> None:
        """Write the upper branch levels, the root bucket, padding, the freelist, then the two meta pages."""
        level = self.branches + [(k, p) for k, p in self.index[len(self.branches) * BRANCH_FANOUT :]]
        while len(level) > 1:
            level = [
                (group[0][0], self._append(branch_page(self.next_id, group)))
                for group in (level[i : i + BRANCH_FANOUT] for i in range(0, len(level), BRANCH_FANOUT))
            ]
        bucket = struct.pack("<QQ", level[0][1], 0)  # bbolt bucket header: root page id, sequence
        root = self._append(leaf_page(self.next_id, [(b"key", bucket)], flags=BUCKET_LEAF_FLAG))
        remaining = self.total_pages - self.next_id
        fl_pages = _pages_for(_HEADER.size + 8 * (len(self.free) + remaining + 1))
        padding = remaining - fl_pages
        if padding < 0:
            raise ValueError("no room left for the freelist; raise the reserve")
        for _ in range(padding):
            self.free.append(self._append(bytes(PAGE)))
        freelist = self._append(freelist_page(self.next_id, self.free, fl_pages))
        self.out.seek(0)
        for pgid in (0, 1):
            self.out.write(meta_page(pgid, root, freelist, self.total_pages, txid - pgid))


def reserve_pages(total_pages: int) -> int:
    """Pages kept free for the tail: upper branch levels, root bucket and a freelist of every free page."""
    worst_free = int(total_pages * (STALE_PAGE_RATE + 0.04)) + 64
    return _pages_for(_HEADER.size + 8 * (worst_free + 1)) + total_pages // (BRANCH_FANOUT * 50) + 8


def split_nodes(elems: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
    """bbolt's node split: a node of at most 4 keys or under a page stays whole; otherwise cut where it passes
    the fill threshold, keeping at least 2 keys per node (so records over half a page make overflow pages)."""
    nodes = []
    rest = elems
    while len(rest) > 2 * _MIN_KEYS and _leaf_size(rest) >= PAGE:
        size, index = _HEADER.size, 0
        for i in range(len(rest) - _MIN_KEYS):
            index = i
            elem = _LEAF_ELEM.size + len(rest[i][0]) + len(rest[i][1])
            if i >= _MIN_KEYS and size + elem > FILL * PAGE:
                break
            size += elem
        nodes.append(rest[:index])
        rest = rest[index:]
    return [*nodes, rest]


def _write_nodes(writer: _BoltWriter, nodes: list[list[tuple[bytes, bytes]]], budget: int) -> bool:
    """Append leaf nodes while they fit the page budget; False once one did not."""
    for node in nodes:
        if writer.next_id + 2 * _pages_for(_leaf_size(node)) + 1 > budget:
            return False
        writer.add_leaf(node)
    return True


def generate(path: Path, size: int, seed: int) -> None:
    """Write exactly ``size`` bytes (a multiple of 4 KiB) of etcd-like bbolt pages to ``path``."""
    if size % PAGE or size < 64 * PAGE:
        raise ValueError(f"size must be a multiple of {PAGE} and at least {64 * PAGE}")
    total_pages = size // PAGE
    budget = total_pages - reserve_pages(total_pages)
    stream = records(seed)
    with open(path, "wb") as out:
        writer = _BoltWriter(out, total_pages, random.Random(seed ^ 0x5EED))
        txid = 1
        # one write transaction per batch of records, split into nodes as bbolt would, until the budget is used
        while _write_nodes(writer, split_nodes([next(stream) for _ in range(TX_RECORDS)]), budget):
            txid += 1
        writer.finish(txid)
        if out.tell() != 2 * PAGE:  # the meta pages were the last write, at the start
            raise AssertionError("unexpected file position")
    if path.stat().st_size != size:
        raise AssertionError(f"{path} is {path.stat().st_size} bytes, expected {size}")
