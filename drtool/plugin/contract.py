"""What a plugin implements, and what the core hands it.

A plugin knows one kind of source (etcd, the Kubernetes API, MLflow, ...). It never sees the store format:
it writes named artifacts through ``BackupContext.artifact`` and reads them back through
``RestoreContext.open``, both streaming, so no artifact is ever held whole in memory or on temp disk.

Contract version 1 (``previous_artifacts``, ``reuse`` and ``discard``, the sink's ``meta``, ``mark`` and
``splice``, and for continuous backup the
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
always; ``discover`` and ``dependencies`` when it has something to say; ``diff`` (``DiffSupport``)
when it can compare a backup with a live system; ``follow`` and ``fold`` (``FollowSupport``) when it can
back its source up continuously, as a chain of a full and deltas; ``schema`` (drtool.plugin.settings) to
have its settings checked before a run; ``platform_checks`` (drtool.plugin.checks) to add plan check types.
Hooks may be methods or module functions bound with ``staticmethod``, as long as their parameters are named
as here (tests/plugins/test_plugin_contract.py checks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from drtool.points import Point
from drtool.repo.manifest import ArtifactInfo

if TYPE_CHECKING:
    from drtool.plugin.checks import PlatformCheck
    from drtool.plugin.settings import Schema

CONTRACT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What a source holds, as counts by kind and total bytes, before anything is copied."""

    counts: Mapping[str, int]
    bytes: int = 0
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


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

    kind: "endpoint" (contacted during restore), "reference" (carried by restored state), "credential" (a key
    or secret the restore needs) or "provisioner" (a storage provisioner's name, a CSI driver, not a network
    address: where its volumes live decides whether it shares the cluster's fate).
    address: host, host:port or URL (for a credential: what holds it; for a provisioner: its name).
    blocks_restore: the restore itself cannot get past it while it is missing (an admission webhook whose
    in-cluster Service does not exist yet rejects every matching write), so the analysis says the restore is
    blocked, not only that the restored system is degraded.
    """

    kind: str
    address: str
    purpose: str
    evidence: str = ""
    blocks_restore: bool = False


class ArtifactSink(Protocol):
    """A write-only stream into the store; closing it (the ``with`` block's end) seals the artifact."""

    meta: dict[str, Any]  # the artifact's meta; may be added to until the artifact is closed

    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    def mark(self) -> int:
        """End the chunk being cut here; return the artifact's chunk count so far (see ``splice``)."""
        ...

    def splice(self, previous: str, start: int, count: int) -> bool:
        """Append chunks ``start``..``start + count`` of this plugin's earlier artifact ``previous`` (from
        ``BackupContext.previous_artifacts``) unread, e.g. an unchanged file's bytes recorded between two
        ``mark`` calls; False when they are not all in the store (then write the bytes). The artifact then
        has no whole-stream ``sha256`` (it is empty)."""
        ...


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
    nothing to report; ``diff``, ``follow`` and ``fold`` are absent unless the
    plugin has them (``DiffSupport``, ``FollowSupport``), and the commands that need them refuse it then.
    """

    name: str
    description: str
    # the keys its source, target and restore options accept (drtool.plugin.settings): `plan validate`, the
    # config loader and `drtool plugins --describe` check and show them; None: not checked
    schema: Schema | None = None
    # its restore writes a cluster's objects: plan checks that read "the restored cluster" use its target
    restores_cluster: bool = False
    # its restore applies a plan's ``transforms:`` (drtool.kube.transforms): the executor hands them to its steps
    takes_transforms: bool = False
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

    def platform_checks(self) -> Sequence[PlatformCheck]:
        """Plan check types this plugin contributes (``checks: [{type: ...}]``, drtool.plugin.checks)."""
        return ()
