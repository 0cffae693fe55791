"""Where a rehearsal restores into, and what it makes unreachable: target providers and rehearsal sources.

A rehearsal must never write into something that matters, so its default target is a fresh one that a
**target provider** brings up empty for the plan's plugins and tears down afterwards. The product defines
the interface (``TargetProvider``, ``RehearsalSource``); providers register in the ``drtool.rehearsal_targets``
entry-point group, named like the ``--target`` they answer (the lab's is ``lab``: a fresh lab started inside
the rehearsal's isolation, lab/targets.py). An existing cluster is named by its kubeconfig and needs no
provider. A drtool without the lab (the container image) has no ``lab`` provider: `--target lab` there is one
line saying so.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from drtool.errors import UsageError
from drtool.plans.schema import Plan, Step
from drtool.plans.steps import step_target
from drtool.plugin.contract import Plugin
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import restore_dependencies
from drtool.servers.etcd import EtcdServer

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog

GROUP = "drtool.rehearsal_targets"
DEFAULT = "lab"
PG_SOCKET_FOLDERS = ("/var/run/postgresql", "/tmp")  # where libpq looks when a URL names no host (Debian, upstream)


@dataclasses.dataclass
class Target:
    description: str  # "lab rehearsal-1a2b3c" or the kubeconfig's path
    overrides: dict[str, dict[str, Any]]  # plugin name -> target mapping laid over the plan's
    teardown: Callable[[], None] = lambda: None  # stop and delete what the provider started (nothing for a cluster)


@runtime_checkable
class RehearsalSource(Protocol):
    """A running source the rehearsal makes unreachable (a lab the backup was taken from)."""

    name: str

    def endpoints(self) -> list[str]:
        """Every ``host:port`` it serves on: all inside the backup's failure domain."""
        ...

    def stop(self) -> None:
        """Make it unreachable, keeping its data (``start`` brings it back)."""
        ...

    def start(self) -> None: ...


@runtime_checkable
class TargetProvider(Protocol):
    """Brings up an empty target for a set of plugins, inside the rehearsal's isolation."""

    def provision(self, plugins: Sequence[Plugin], root: Path | None = None) -> Target:
        """A new empty target for ``plugins`` (under ``root``, where the provider keeps what it makes)."""
        ...

    def source(self, name: str) -> RehearsalSource:
        """The running source named ``name`` that this provider made (`drtool rehearse --source-lab`)."""
        ...


def provider(name: str = DEFAULT) -> TargetProvider:
    """The installed provider called ``name``; a UsageError (one line) when there is none."""
    for ep in entry_points(group=GROUP, name=name):
        try:
            found = ep.load()()
        except ImportError:  # the entry names a package this install does not have (the image has no lab)
            continue
        if isinstance(found, TargetProvider):
            return found
    installed = sorted({ep.name for ep in entry_points(group=GROUP)})
    raise UsageError(
        f"no rehearsal target provider {name!r} is installed{' (the lab is not)' if name == DEFAULT else ''}",
        "pass --target with the path of a kubeconfig of a cluster to restore into"
        + (f", or one of: {', '.join(installed)}" if installed else ""),
    )


def is_cluster(target: str) -> bool:
    """Whether ``--target`` names an existing cluster (a kubeconfig path) rather than a provider."""
    return "/" in target or Path(target).expanduser().is_file()


def kubeconfig_target(path: str, plugins: Iterable[Plugin]) -> Target:
    """An existing cluster named by a kubeconfig: every step's target gets ``kubeconfig`` pointing at it."""
    if not Path(path).expanduser().is_file():
        raise UsageError(f"--target {path}: no such kubeconfig", "pass `lab` or the path of a kubeconfig file")
    resolved = str(Path(path).expanduser().resolve())
    return Target(resolved, {p.name: {"kubeconfig": resolved} for p in plugins})


def stop_restored_servers(root: Path) -> None:
    """Stop etcd members that restores under ``root`` started (their markers name them), e.g. a lab's."""
    for marker in root.glob("**/*.drtool-restore.json"):
        try:
            server = json.loads(marker.read_text()).get("server")
        except (OSError, ValueError):
            continue
        if isinstance(server, Mapping):
            EtcdServer.from_state(dict(server)).stop()


def reachable_endpoints(
    repo: Repository,
    catalog: Catalog | None,
    target: str,
    plan: Plan,
    manifest: Manifest,
    steps: Iterable[tuple[Step, Plugin]],
) -> list[str]:
    """What a restore into ``target`` must reach beyond the rehearsal's namespace (isolation.py): the store
    and a network catalog (``host:port``, or the path of its Unix socket); for an existing cluster, every
    endpoint the steps' plugins say the restore contacts (``restore_dependencies``: the static analysis's
    own list). A provider's fresh target is started inside."""
    found = [repo.backend.endpoint()]
    if catalog is not None and "://" in catalog.url and not catalog.url.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        url = make_url(catalog.url)
        port = url.port or 5432
        if url.host:
            found.append(f"{url.host}:{port}")
        else:  # libpq's Unix socket: kept in reach of the confined restore (confine.py covers the host's others)
            folders = url.query.get("host") or PG_SOCKET_FOLDERS
            found += [f"{folder}/.s.PGSQL.{port}" for folder in ([folders] if isinstance(folders, str) else folders)]
    if is_cluster(target):
        overrides = kubeconfig_target(target, [p for _, p in steps]).overrides
        for step, plugin in steps:
            deps = restore_dependencies(repo, plugin, manifest, step_target(plan, step, overrides))
            found += [d.address for d in deps if d.kind == "endpoint"]
    return [f for f in dict.fromkeys(found) if f]
