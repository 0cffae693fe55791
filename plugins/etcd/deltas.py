"""The delta artifact: etcd's watch events between two revisions, one line of JSON per revision.

``deltas.jsonl`` (docs/etcd.md, "Delta format"):

    {"format": "drtool-etcd-deltas", "version": 1, "cluster_id": ..., "first": 1001, "last": 1200,
     "revisions": 200, "events": 230, "leases": {"<lease id>": <granted TTL or null>}}
    {"r": 1001, "t": "2026-12-01T14:05:00.123456Z", "ops": [{"o": "p", "k": ..., "v": ..., "c": 990, "n": 3,
                                                           "l": "<lease id>", "pm": 995}, ...]}
    ...

One line per revision, in revision order, every revision from ``first`` to ``last`` present: in etcd every
revision is one write transaction with at least one change, so a missing revision is a missing write,
and a reader checks continuity line by line. ``t`` is when the follower received the revision (the
time a ``--at TIME`` restore compares with). An op is a put (``o: p``: key, value, create revision,
version, lease) or a delete (``o: d``); ``pm`` is the key's mod revision before the op, from the watch's
``prev_kv`` (absent when etcd had none), so the replay can check it rebuilds exactly the source's history.
Keys and values are base64, as etcd's gateway sends them; the store compresses and encrypts the artifact.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from typing import IO, Any

from drtool.errors import IntegrityError

ARTIFACT = "deltas.jsonl"
FORMAT = "drtool-etcd-deltas"
VERSION = 1


def now_text() -> str:
    """UTC now as the chain records times (RFC 3339 with microseconds)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class Op:
    put: bool
    key: str  # base64
    value: str = ""  # base64
    create: int = 0
    version: int = 0
    lease: int = 0
    prev_mod: int | None = None  # the key's mod revision before this op (prev_kv), when etcd sent it

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Op:
        """One event of etcd's gateway watch stream (PUT is the enum's zero value, so ``type`` is absent)."""
        kv, prev = event.get("kv") or {}, event.get("prev_kv")
        prev_mod = int(prev.get("mod_revision", 0)) if prev else None
        if event.get("type") == "DELETE":
            return cls(False, kv.get("key", ""), prev_mod=prev_mod)
        return cls(
            True,
            kv.get("key", ""),
            kv.get("value", ""),
            int(kv.get("create_revision", 0)),
            int(kv.get("version", 0)),
            int(kv.get("lease", 0)),
            prev_mod,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"o": "p" if self.put else "d", "k": self.key}
        if self.put:
            out |= {"v": self.value, "c": self.create, "n": self.version}
            if self.lease:
                out["l"] = str(self.lease)
        if self.prev_mod is not None:
            out["pm"] = self.prev_mod
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Op:
        prev = raw.get("pm")
        if raw["o"] == "d":
            return cls(False, raw["k"], prev_mod=prev)
        return cls(True, raw["k"], raw.get("v", ""), int(raw["c"]), int(raw["n"]), int(raw.get("l", 0)), prev)


@dataclasses.dataclass(frozen=True)
class Revision:
    """Every change etcd made at one revision (one write transaction), and when the follower saw it."""

    revision: int
    time: str
    ops: tuple[Op, ...]

    def line(self) -> bytes:
        body = {"r": self.revision, "t": self.time, "ops": [op.to_json() for op in self.ops]}
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    @property
    def leases(self) -> set[int]:
        return {op.lease for op in self.ops if op.lease}


def header(cluster_id: str, first: int, last: int, events: int, leases: Mapping[int, int | None]) -> bytes:
    body = {
        "format": FORMAT,
        "version": VERSION,
        "cluster_id": cluster_id,
        "first": first,
        "last": last,
        "revisions": last - first + 1,
        "events": events,
        "leases": {str(k): v for k, v in sorted(leases.items())},
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


@dataclasses.dataclass
class DeltaFile:
    """A delta artifact being read: its header, then its revisions (checked for continuity as they come)."""

    name: str
    head: dict[str, Any]
    lines: Iterator[bytes]

    @classmethod
    def open(cls, name: str, stream: IO[bytes] | Any) -> DeltaFile:
        lines = _lines(stream)
        first = next(lines, b"")
        try:
            head = json.loads(first)
        except ValueError:
            raise IntegrityError(f"etcd delta {name} has no readable header") from None
        if head.get("format") != FORMAT or head.get("version") != VERSION:
            raise IntegrityError(
                f"etcd delta {name} is format {head.get('format')} v{head.get('version')}, not {FORMAT} v1"
            )
        return cls(name, head, lines)

    @property
    def first(self) -> int:
        return int(self.head["first"])

    @property
    def last(self) -> int:
        return int(self.head["last"])

    @property
    def leases(self) -> dict[int, int | None]:
        return {int(k): v for k, v in (self.head.get("leases") or {}).items()}

    def revisions(self) -> Iterator[Revision]:
        """Every revision first..last in order; a missing, repeated or extra line is an IntegrityError."""
        expected = self.first
        for line in self.lines:
            raw = json.loads(line)
            rev = int(raw["r"])
            if rev != expected:
                raise IntegrityError(f"etcd delta {self.name} jumps from revision {expected - 1} to {rev}")
            yield Revision(rev, raw["t"], tuple(Op.from_json(o) for o in raw["ops"]))
            expected += 1
        if expected != self.last + 1:
            raise IntegrityError(f"etcd delta {self.name} ends at revision {expected - 1}, its header says {self.last}")


def _lines(stream: Any) -> Iterator[bytes]:
    """Lines of a verified store stream; a block is scanned once, however long a line is."""
    pending = bytearray()
    for block in stream:
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            pending += block[start:end]
            if pending:
                yield bytes(pending)
            pending.clear()
            start = end + 1
        pending += block[start:]
    if pending:
        yield bytes(pending)
