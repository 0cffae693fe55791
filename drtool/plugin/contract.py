"""What a plugin implements, and what the core hands it.

A plugin knows one kind of source (etcd, the Kubernetes API, MLflow, ...). It never sees the store format:
it writes named artifacts through ``BackupContext.artifact`` and reads them back through
``RestoreContext.open``, both streaming, so no artifact is ever held whole in memory or on temp disk.

Contract version 1 (``previous_artifacts``, ``reuse`` and ``discard``, and for continuous backup the
optional ``follow``/``fold`` hooks and ``RestoreContext.deltas``/``point``, were added compatibly).
Rules every plugin keeps (checked by tests/plugins/test_plugin_contract.py):
- ``backup`` raises ``drtool.errors.SourceError`` (one line, with a hint) when its source fails; the core
  then marks the backup partial and keeps the other plugins' artifacts.
- ``restore`` is idempotent: a second run leaves the same state and says so (``RestoreResult.changed``).
- ``restore`` must not make anything visible on the target until the artifacts it uses have been read and
  verified (stage, then commit).
- ``dependencies`` names every endpoint the restore will contact and every reference restored objects
  will carry, for the independence analysis.

A plugin subclasses ``BasePlugin`` and states only what it has: ``backup``, ``restore`` and ``verify``
always; ``discover``, ``dependencies`` and ``lab`` when it has something to say; ``diff`` (``DiffSupport``)
when it can compare a backup with a live system; ``follow`` and ``fold`` (``FollowSupport``) when it can
back its source up continuously, as a chain of a full and deltas. Hooks may be methods or module functions bound with
``staticmethod``, as long as their parameters are named as here (tests/plugins/test_plugin_contract.py checks).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from drtool.errors import UsageError

if TYPE_CHECKING:
    from drtool.lab.lab import Lab

CONTRACT_VERSION = 1
LATEST = "latest"


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 / RFC 3339 time as an aware UTC datetime (a time without offset is taken as UTC)."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.astimezone(dt.UTC) if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True)
class Point:
    """Where to restore to: a log position (etcd revision), a time, or the newest point the store holds."""

    position: int | None = None
    time: dt.datetime | None = None

    @property
    def latest(self) -> bool:
        return self.position is None and self.time is None

    @classmethod
    def parse(cls, text: str | int) -> Point:
        """``latest``, an integer (a position: an etcd revision), or an RFC 3339 / ISO 8601 time (UTC if
        no offset is given)."""
        raw = str(text).strip()
        if raw == LATEST:
            return cls()
        if raw.isdigit():
            return cls(position=int(raw))
        try:
            return cls(time=parse_time(raw))
        except ValueError:
            raise UsageError(
                f"--at {raw!r} is neither a revision, a time nor 'latest'",
                "for example --at 18342, --at 2026-12-01T14:05:00Z or --at latest",
            ) from None

    def describe(self) -> str:
        if self.position is not None:
            return f"revision {self.position}"
        return f"{self.time:%Y-%m-%dT%H:%M:%SZ}" if self.time else LATEST

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "time": f"{self.time:%Y-%m-%dT%H:%M:%S.%fZ}" if self.time else None}


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What a source holds, as counts by kind and total bytes, before anything is copied."""

    counts: Mapping[str, int]
    bytes: int = 0
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ArtifactInfo:
    """An artifact as recorded in a backup manifest."""

    plugin: str
    name: str
    size: int
    sha256: str
    meta: Mapping[str, Any]
    sensitive: bool = False


@dataclasses.dataclass(frozen=True)
class RestoreResult:
    changed: bool
    summary: str
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Dependency:
    """Something a restore needs or a restored object will point at.

    kind: "endpoint" (contacted during restore), "reference" (carried by restored state) or
    "credential" (a key or secret the restore needs).
    address: host, host:port or URL (for a credential: what holds it).
    """

    kind: str
    address: str
    purpose: str
    evidence: str = ""


class ArtifactSink(Protocol):
    """A write-only stream into the store; closing it (the ``with`` block's end) seals the artifact."""

    def write(self, data: bytes | bytearray | memoryview) -> int: ...


class ArtifactSource(Protocol):
    """A verified read stream out of the store; the whole-artifact hash is checked when EOF is reached."""

    def read(self, n: int = -1) -> bytes: ...

    def readinto(self, buffer: bytearray | memoryview) -> int: ...

    def __iter__(self) -> Iterator[bytes]: ...


class BackupContext(Protocol):
    backup_id: str
    shard: tuple[int, int] | None  # (index, count) when this is one worker of a sharded backup (docs/scaling.md)

    def artifact(
        self, name: str, *, meta: Mapping[str, Any] | None = None, sensitive: bool = False
    ) -> AbstractContextManager[ArtifactSink]:
        """Open a new artifact for writing; it exists in the backup only if the block exits cleanly."""
        ...

    def progress(self, description: str, total: int | None = None) -> Any:
        """A progress handle with ``advance(n)``; a no-op when not attached to a terminal."""
        ...

    def previous_artifacts(self) -> list[ArtifactInfo]:
        """This plugin's artifacts in the newest earlier backup of the same backup set where it succeeded."""
        ...

    def reuse(
        self, name: str, previous: str, *, meta: Mapping[str, Any] | None = None, sensitive: bool = False
    ) -> bool:
        """Record ``name`` with the content of earlier artifact ``previous``, unread and unuploaded; False when
        its chunks are no longer all in the store (then write the artifact)."""
        ...

    def discard(self, name: str) -> None:
        """Drop an artifact this plugin closed earlier in this backup (its source changed under it)."""
        ...


class RestoreContext(Protocol):
    backup_id: str
    created: str
    artifacts: list[ArtifactInfo]
    plugin_meta: Mapping[str, Any]  # what this plugin's backup() returned for this backup

    def open(self, name: str) -> AbstractContextManager[ArtifactSource]:
        """Open one of this plugin's artifacts for verified streaming reads."""
        ...

    def progress(self, description: str, total: int | None = None) -> Any: ...

    # A point-in-time restore (``--at``) of a delta chain (docs/store-format.md, "Delta chains") is handed the
    # context of the full backup it starts from, with these set; a plain restore has no deltas and no point.
    deltas: Sequence[RestoreContext]  # the chain's deltas to replay, in order, each with its own artifacts
    point: Point | None  # the point asked for (``Point()`` is the newest the chain holds)


@runtime_checkable
class Plugin(Protocol):
    name: str
    description: str

    def discover(self, source: Mapping[str, Any]) -> Inventory: ...

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        """Stream artifacts into ``ctx``; return facts for the manifest (versions, revisions, failure domain)."""
        ...

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult: ...

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        """Read the target back and compare with the backup; ``options`` are the restore's (dry run,
        namespace map, ...), so verify checks what that restore was asked to do."""
        ...

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]: ...


@runtime_checkable
class LabSupport(Protocol):
    """Optional, as a plugin's ``lab`` attribute: how the plugin's source is stood up in a lab.

    The demo, `drtool lab seed`, rehearsals into a fresh lab and the tests all use it, so a new plugin
    joins the whole story (seed, back up, restore into a fresh lab, verify) by providing this.
    """

    kinds: tuple[str, ...]  # lab component kinds the plugin's source and target need running

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        """Start what is needed in ``lab``, fill it with realistic content, return the backup source mapping."""
        ...

    def target(self, lab: Lab) -> dict[str, Any]:
        """Start what is needed in an empty ``lab``; return the restore target mapping pointing at it."""
        ...


@runtime_checkable
class DiffResult(Protocol):
    """What ``DiffSupport.diff`` returns; `drtool diff` only prints it (the comparison is the plugin's)."""

    equal: bool  # False: `drtool diff` exits with ``drtool.errors.Differs``' code
    summary: str  # one line

    def tables(self) -> Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]]:
        """(title, column names, rows of cells) for each table to print."""
        ...

    def to_json(self) -> dict[str, Any]: ...


@runtime_checkable
class DiffSupport(Protocol):
    """Optional, as a plugin's ``diff`` method: what differs between a backup and a live system.

    `drtool diff ID -p PLUGIN -t KEY=VALUE` calls it after the core checked that every chunk of the
    plugin's artifacts is in the store; ``target`` is a restore target mapping naming the live system.
    """

    def diff(self, ctx: RestoreContext, target: Mapping[str, Any]) -> DiffResult: ...


@dataclasses.dataclass(frozen=True)
class Span:
    """The positions (etcd revisions) and source times a chain link holds; ``first`` is None for a full."""

    first: int | None
    last: int
    first_time: str | None
    last_time: str


WriteLink = Callable[[BackupContext], tuple[Mapping[str, Any], Span]]  # writes a link's artifacts: (meta, span)


class FollowContext(Protocol):
    """What the core gives a plugin's ``follow`` hook: where the chain stands and how to add links to it.

    Each link is an ordinary backup (manifest written last), so a follower killed at any moment leaves the
    chain at its last durable link; ``tip`` tells the next run where to continue.
    """

    backup_set: str
    options: Mapping[str, Any]

    def stopping(self) -> bool:
        """True once SIGTERM/SIGINT arrived: write what is buffered and return."""
        ...

    def tip(self) -> Any:
        """The newest link of this plugin's chains in the set, or None: ``.link`` (``drtool.repo.chains.Link``)
        and ``.meta`` (what the plugin returned for it)."""
        ...

    def write_full(self, write: WriteLink) -> Any:
        """Start a new chain: ``write`` writes a full backup; returns the new tip."""
        ...

    def write_delta(self, after: Any, write: WriteLink) -> Any:
        """Add the link after the tip ``after``: ``write`` writes the delta's artifacts; returns the new tip."""
        ...


@runtime_checkable
class FollowSupport(Protocol):
    """Optional, as a plugin's ``follow`` and ``fold`` methods: continuous backup of a source with a log.

    `drtool follow` runs ``follow``; `drtool compact` runs ``fold``; a restore with ``--at`` hands the
    plugin's ``restore`` and ``verify`` a context with ``deltas`` and ``point`` set. A plugin without them
    is refused by those commands with a usage error (docs/plugins.md, "follow and fold").
    """

    def follow(self, source: Mapping[str, Any], ctx: FollowContext) -> None:
        """Back up continuously until ``ctx.stopping()``: a full, then deltas (docs/etcd.md)."""
        ...

    def fold(self, ctx: RestoreContext, out: BackupContext, options: Mapping[str, Any]) -> Mapping[str, Any]:
        """Write into ``out`` a full backup equal to ``ctx`` (a full) with ``ctx.deltas`` replayed; return its meta."""
        ...


class BasePlugin:
    """Defaults for the optional hooks, so a plugin states only what it has.

    Subclass it, set ``name`` and ``description``, and give ``backup``, ``restore`` and ``verify``
    (``Plugin`` says what they take and return). ``discover`` and ``dependencies`` default to having
    nothing to report, ``lab`` to no lab support; ``diff``, ``follow`` and ``fold`` are absent unless the
    plugin has them (``DiffSupport``, ``FollowSupport``), and the commands that need them refuse it then.
    """

    name: str
    description: str
    lab: LabSupport | None = None
    # a sharded backup (docs/scaling.md) runs a shardable plugin on every worker, each with ``ctx.shard``
    # set, and the others on worker 0 only
    shardable: bool = False

    def merge_shards(self, metas: list[dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
        """The plugin's meta for a sharded backup from its workers' metas, and the artifact names to leave
        out (what is torn across workers). Only shardable plugins are asked; this default suits none."""
        raise NotImplementedError(f"plugin {self.name} is not shardable")

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        """Nothing counted: the plugin cannot tell what a backup would copy before copying it."""
        return Inventory(counts={})

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        """Nothing beyond the store and the key slot, which the core adds for every restore."""
        return []
