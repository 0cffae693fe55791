"""The standby's own record, kept on the standby cluster: a ConfigMap ``standby-<set>`` in ``drtool-standby``.

The record is gzipped JSON; past what one ConfigMap holds (1 MiB: a plugin's state names every object it
tracks, about 200 bytes each before compression) it is split into parts named by its digest. Why the
standby cluster and not the catalog: the record describes that cluster's contents (which link its
objects reflect, what it holds back), so it lives and dies with them. A standby rebuilt from scratch starts
with no record and hydrates from the newest full; a catalog on another machine could claim links the
cluster never saw. Every write is a replace at the resourceVersion read, so two standby processes pointed
at the same cluster cannot both advance it: the second gets a conflict and stops (``StandbyBusy``).

Resuming without duplicates: ``applying`` is written before a link is applied and the position after it.
A standby killed between the two finds ``applying`` set and applies that link again; each plugin's apply is
idempotent (objects by name, server-side apply), so the second apply changes nothing twice. The failover
writes its results here too (``failover``), and into the catalog.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
from typing import Any

from drtool.errors import DrtoolError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.settings import Connection
from drtool.kube.skips import STANDBY_NAMESPACE
from drtool.standby.links import Position

NAMESPACE = STANDBY_NAMESPACE  # never backed up nor followed (drtool/kube/skips.py)
KEY = "state.json.gz"
PARTS, DIGEST = "parts", "sha256"
PART_BYTES = 700 * 1024  # base64 makes it 4/3: under the 1 MiB a ConfigMap holds
PART_LABEL = "drtool.dev/standby-record"
VERSION = 1


class StandbyBusy(DrtoolError):
    """Another standby process advanced the same record: two must not hydrate one cluster."""


@dataclasses.dataclass
class StandbyRecord:
    """One set's standby: each plugin's ``StandbyState`` (drtool/plugin/contract.py: position, objects, holds,
    deferred deletions, as the plugin wrote it) and the core's own bookkeeping around it."""

    backup_set: str
    plugins: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # plugin -> its StandbyState
    stored: dict[str, str] = dataclasses.field(default_factory=dict)  # plugin -> store time of its last link
    applying: dict[str, str] | None = None  # {"plugin", "backup_id"} while a link is being applied
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # backup id or object -> why
    applied: int = 0  # links applied so far (a resumed apply of the same link counts once)
    fence: dict[str, Any] | None = None  # the fence the standby saw (kept even if the record is deleted)
    failover: dict[str, Any] | None = None  # what the failover measured

    def position(self, plugin: str) -> Position | None:
        """Where the standby stands in ``plugin``'s chains (None: nothing applied yet)."""
        raw = self.plugins.get(plugin) or {}
        if raw.get("chain") is None or raw.get("link") is None:
            return None
        return Position(raw["chain"], int(raw["seq"]), raw["link"], self.stored.get(plugin), raw.get("link_time") or "")

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["version"] = VERSION
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StandbyRecord:
        if data.get("version") != VERSION:
            raise DrtoolError(f"standby record version {data.get('version')!r} is not {VERSION}", "upgrade drtool")
        return cls(
            backup_set=data["backup_set"],
            plugins={p: dict(v) for p, v in (data.get("plugins") or {}).items()},
            stored=dict(data.get("stored") or {}),
            applying=data.get("applying"),
            skipped=dict(data.get("skipped") or {}),
            applied=int(data.get("applied") or 0),
            fence=data.get("fence"),
            failover=data.get("failover"),
        )


class StateStore:
    """Reads and writes one set's record on the standby cluster."""

    def __init__(self, kubeconfig: str, backup_set: str) -> None:
        self.client = KubeClient(Connection(kubeconfig=kubeconfig))
        self.backup_set = backup_set
        self.name = f"standby-{backup_set}"
        self._version: str | None = None
        self._parts_maybe = True  # parts may exist (a new process cannot know): list them once after a save

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{NAMESPACE}/configmaps/{self.name}"

    def read(self) -> StandbyRecord | None:
        """The record as the cluster holds it, or None when there is none (nothing is created)."""
        try:
            cm = self.client.get(self.path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None
        self._version = cm["metadata"]["resourceVersion"]
        data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
        if PARTS in data:
            packed = b"".join(self._part(data[DIGEST], i) for i in range(int(data[PARTS])))
            if hashlib.sha256(packed).hexdigest()[:16] != data[DIGEST]:
                raise DrtoolError(
                    f"the standby record {NAMESPACE}/{self.name} does not match its parts (edited by hand?)",
                    "delete the namespace drtool-standby's record to hydrate afresh from the newest full",
                )
        else:
            packed = base64.b64decode(binary.get(KEY, ""))
        return StandbyRecord.from_json(json.loads(gzip.decompress(packed))) if packed else None

    def load(self) -> StandbyRecord:
        """The record, or a fresh one (and the namespace and ConfigMap created) when there is none."""
        return self.read() or self._create()

    def save(self, state: StandbyRecord) -> None:
        """Write the record: gzipped JSON in the ConfigMap, or, past what one ConfigMap holds (1 MiB), in parts
        named by the content's digest, written first; the replace of the main ConfigMap at its
        resourceVersion is what commits (a standby killed before it leaves the old record whole)."""
        packed = gzip.compress(json.dumps(state.to_json(), sort_keys=True).encode(), compresslevel=6)
        body = self._object(state, packed)
        body["metadata"]["resourceVersion"] = self._version
        try:
            resp = self.client.request("PUT", self.path, body=json.dumps(body).encode())
        except ApiError as exc:
            if exc.status == 409:
                raise StandbyBusy(
                    f"the standby record {NAMESPACE}/{self.name} was changed by another process",
                    "run one `drtool standby` per set and target",
                ) from None
            raise
        self._version = resp.json()["metadata"]["resourceVersion"]
        keep = (body.get("data") or {}).get(DIGEST)
        if keep is not None or self._parts_maybe:
            self._drop_parts(keep)
            self._parts_maybe = keep is not None

    # --- parts of a large record ------------------------------------------------------------------

    def _part_name(self, digest: str, index: int) -> str:
        return f"{self.name}-{digest}-{index}"

    def _part(self, digest: str, index: int) -> bytes:
        cm = self.client.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{self._part_name(digest, index)}")
        return base64.b64decode((cm.get("binaryData") or {}).get(KEY, ""))

    def _write_parts(self, packed: bytes, digest: str) -> int:
        pieces = [packed[i : i + PART_BYTES] for i in range(0, len(packed), PART_BYTES)]
        for index, piece in enumerate(pieces):
            part = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": self._part_name(digest, index), "namespace": NAMESPACE, "labels": self._labels()},
                "binaryData": {KEY: base64.b64encode(piece).decode()},
            }
            path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
            self.client.request("POST", path, body=json.dumps(part).encode(), ok=(201, 409))  # 409: same content
        return len(pieces)

    def _drop_parts(self, keep: str | None) -> None:
        """Delete the parts of earlier records (and of a save killed before its commit)."""
        selector = f"{PART_LABEL}={self.name}"
        listed = self.client.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps", {"labelSelector": selector})
        for item in listed.get("items") or []:
            name = item["metadata"]["name"]
            if keep is None or not name.startswith(f"{self.name}-{keep}-"):
                path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}"
                self.client.request("DELETE", path, ok=(200, 202, 404))

    def _labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/managed-by": "drtool", PART_LABEL: self.name}

    def _create(self) -> StandbyRecord:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.client.request("POST", "/api/v1/namespaces", body=json.dumps(ns).encode(), ok=(201, 409))
        state = StandbyRecord(self.backup_set)
        resp = self.client.request(
            "POST",
            f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            body=json.dumps(self._object(state)).encode(),
            ok=(201, 409),
        )
        if resp.status == 409:
            return self.load()
        self._version = resp.json()["metadata"]["resourceVersion"]
        return state

    def _object(self, state: StandbyRecord, packed: bytes | None = None) -> dict[str, Any]:
        if packed is None:
            packed = gzip.compress(json.dumps(state.to_json(), sort_keys=True).encode())
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/managed-by": "drtool"},
            },
        }
        if len(packed) <= PART_BYTES:
            body["binaryData"] = {KEY: base64.b64encode(packed).decode()}
        else:
            digest = hashlib.sha256(packed).hexdigest()[:16]
            body["data"] = {PARTS: str(self._write_parts(packed, digest)), DIGEST: digest}
        return body
