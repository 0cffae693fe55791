"""What a plugin implements, and what the core hands it.

A plugin knows one kind of source (etcd, the Kubernetes API, MLflow, ...). It never sees the store format:
it writes named artifacts through ``BackupContext.artifact`` and reads them back through
``RestoreContext.open``, both streaming, so no artifact is ever held whole in memory or on temp disk.

Contract version 1 (``previous_artifacts``, ``reuse`` and ``discard``, the sink's ``meta``, ``mark`` and
``splice``, and for continuous backup the
optional ``follow``/``fold`` hooks and ``RestoreContext.deltas``/``point``, and for a warm standby the
optional ``hydrate``/``settle``/``release`` hooks, were added compatibly).
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
back its source up continuously, as a chain of a full and deltas; ``hydrate``, ``settle`` and ``release``
(``StandbySupport``) when it can keep a live standby hydrated from that chain; ``schema`` (drtool.plugin.settings) to
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


# A restore's verification verdict. A verify that had nothing to check returns no checks, and says so: an all()
# over nothing is not a pass, so a restore is verified only when at least one check ran and every one passed.
SKIPPED, NO_CHECKS, PASSED, FAILED = "skipped", "none", "passed", "failed"
VERDICT_TEXT = {
    SKIPPED: "not verified: verification skipped (--no-verify)",
    NO_CHECKS: "not verified: no checks ran (the plugin had nothing to check)",
    PASSED: "verified",
    FAILED: "verification failed",
}


def verification(checks: Sequence[Check], ran: bool = True) -> str:
    """The verdict: ``skipped`` (verify did not run), ``none`` (it ran and checked nothing), ``failed`` (a
    check failed) or ``passed`` (at least one check, every one ok)."""
    if not ran:
        return SKIPPED
    if not checks:
        return NO_CHECKS
    return PASSED if all(c.ok for c in checks) else FAILED


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
    sha256: str | None  # the SHA-256 (hex) of every byte written, once closed ("" when chunks were spliced)

    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    def read_from(self, readinto: Callable[[memoryview], int], limit: int) -> memoryview:
        """Read up to ``limit`` bytes from a source's ``readinto`` straight into the store's chunking window
        (no copy in between); returns them, empty at the source's end. The same as ``write`` of what was
        read, with one copy less."""
        ...

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
        namespace map, ...), so verify checks what that restore was asked to do. Nothing to check (a dry run
        wrote nothing, the backup holds none of what the plugin restores): return no checks, never a check
        that checks nothing; the restore is then reported as not verified (``verification``: ``none``)."""
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


# --- warm standby (optional) ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tracked:
    """One object a standby holds because the chain brought it: its identity in the source and the target.

    ``source_uid`` tells a recreated object (same name, new uid) from an update; ``target_uid`` is what
    owner references to it must carry in the standby (owners are relinked across links, not only within
    one); ``version`` is the source's version last applied (its resourceVersion, or a digest of a full's
    record), so a link applied again skips it; ``target_version`` the standby's resourceVersion after that
    apply (an apply that leaves it so changed nothing).
    """

    source_uid: str
    target_uid: str
    version: str
    target_version: str = ""


@dataclasses.dataclass(frozen=True)
class Deferral:
    """A deletion seen in a link and not applied yet: ``seen`` is when it happened in the source (RFC 3339
    UTC, the delta's observed time), and it is applied once ``seen`` is older than ``delete_after``."""

    source_uid: str
    seen: str


@dataclasses.dataclass
class StandbyState:
    """What a standby carries from one link to the next, for one plugin; the core persists it.

    The core writes it (``to_json``) atomically after each ``hydrate``/``settle``/``release`` that returned,
    and hands the last written one back (``from_json``) to the next call, also after a restart. A standby
    killed mid-apply therefore restarts from the state before that link and applies the link again, which is
    why ``hydrate`` must be idempotent. The plugin owns ``objects``, ``held`` and ``deferred``; the core owns
    where the standby stands in the chain (``chain``, ``seq``, ``link``, ``link_time``) and sets them after a
    ``hydrate`` returned.
    """

    plugin: str
    chain: str | None = None  # base backup id of the chain the standby follows
    seq: int = -1  # seq of the last link applied completely (-1: none)
    link: str | None = None  # its backup id
    link_time: str | None = None  # its source time (``Span.last_time``): lag = now - this
    objects: dict[str, Tracked] = dataclasses.field(default_factory=dict)  # plugin's object key -> identity
    held: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # key -> field path -> original
    deferred: dict[str, Deferral] = dataclasses.field(default_factory=dict)  # key -> deletion waiting

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StandbyState:
        fields = {f.name for f in dataclasses.fields(cls)}
        raw = {k: v for k, v in data.items() if k in fields}
        raw["objects"] = {k: Tracked(**v) for k, v in (data.get("objects") or {}).items()}
        raw["held"] = {k: dict(v) for k, v in (data.get("held") or {}).items()}
        raw["deferred"] = {k: Deferral(**v) for k, v in (data.get("deferred") or {}).items()}
        return cls(**raw)


@dataclasses.dataclass(frozen=True)
class StandbyOptions:
    """How a standby applies links. ``delete_after``: seconds a deletion seen in the source waits before the
    standby applies it (a mass deletion on the primary, by an attacker or an accident, does not empty the
    standby before a person looks); ``now``: the clock deferrals are judged by (None: the current UTC time)."""

    delete_after: float = 3600.0
    now: str | None = None


@dataclasses.dataclass(frozen=True)
class Hydrated:
    """What one ``hydrate``/``settle``/``release`` did, as counts, and the state to persist after it.

    ``created``/``updated``/``unchanged``: objects applied; ``deleted``: deletions applied (due deferrals);
    ``deferred``: deletions now waiting in total; ``held``: objects held in total (``released`` on failover);
    ``failed``: one line per object the target refused (the link still counts as applied: the next link, or
    a person, fixes it; the core reports them).
    """

    state: StandbyState
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    deferred: int = 0
    held: int = 0
    released: int = 0
    failed: Sequence[str] = ()


@runtime_checkable
class StandbySupport(Protocol):
    """Optional, as a plugin's ``hydrate``, ``settle`` and ``release``: keep a live standby hydrated from a
    delta chain (``FollowSupport``), and hand it over on failover (docs/plugins.md, "standby").

    The standby never talks to the source: it only reads links from the store, so the independence
    guarantees of a restore still hold. Every object is applied *held* (drtool.kube.holds: Deployments and
    StatefulSets at zero replicas, Jobs, CronJobs, TrainJobs, RayJobs suspended, GitOps sync off; the
    originals recorded in ``state.held`` and on the object), so the standby runs nothing until ``release``.
    """

    def hydrate(
        self, ctx: RestoreContext, target: Mapping[str, Any], state: StandbyState, options: StandbyOptions
    ) -> Hydrated:
        """Apply ONE link (``ctx`` is its own context: a full's or a delta's artifacts, ``deltas`` empty,
        ``point`` None) to the live ``target``, idempotently: applying it again changes and duplicates
        nothing. A full replaces: objects of ``state.objects`` it does not hold become deletions. Deletions
        are recorded in ``deferred``, and those already due are applied."""
        ...

    def settle(self, target: Mapping[str, Any], state: StandbyState, options: StandbyOptions) -> Hydrated:
        """Apply the deferred deletions now due (the core calls it between links: a quiet source writes none)."""
        ...

    def release(self, target: Mapping[str, Any], state: StandbyState) -> Hydrated:
        """Failover: put back every original ``state.held`` records (replicas, suspensions, sync), in
        dependency order; deferred deletions stay deferred (the core decides, e.g. ``settle`` with
        ``delete_after=0``)."""
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
