"""Labs made by the plugins' ``LabSupport``: seeded sources, and the target a rehearsal restores into.

A fresh lab is a rehearsal's default target because a rehearsal must never write into something that
matters. Each plugin says which lab components it needs (``lab.kinds``), fills a source (``lab.seed``) and
returns the target mapping that points at an empty one (``lab.target``), so a new plugin with LabSupport is
seeded, backed up and rehearsed (`drtool lab seed`, `drtool demo`, `drtool rehearse`) with no change here.
The Kubernetes-reading plugins' support starts the living lab (controllers, Kueue, cert-manager), in the
source and in the target alike.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drtool_lab.lab import Lab
from drtool_lab.support import lab_support

from drtool.errors import DrtoolError, UsageError
from drtool.plans.schema import Plan, Step
from drtool.plans.steps import step_target
from drtool.plugin.contract import Plugin
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import restore_dependencies
from drtool.servers.etcd import EtcdServer

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog

PG_SOCKET_FOLDERS = ("/var/run/postgresql", "/tmp")  # where libpq looks when a URL names no host (Debian, upstream)


@dataclasses.dataclass
class Target:
    description: str  # "lab rehearsal-1a2b3c" or the kubeconfig's path
    overrides: dict[str, dict[str, Any]]  # plugin name -> target mapping laid over the plan's
    lab: Lab | None = None

    def teardown(self) -> None:
        """Stop everything the rehearsal started in its lab (servers restores started included); delete it."""
        if self.lab is None:
            return
        stop_restored_servers(self.lab.root)
        self.lab.down()


def lab_plugins(names: Iterable[str] | None = None) -> list[Plugin]:
    """Installed plugins with LabSupport (all, or those named), in name order."""
    installed = load_plugins()
    if names is not None:
        chosen = [get_plugin(n) for n in names]
        missing = [p.name for p in chosen if lab_support(p.name) is None]
        if missing:
            raise UsageError(f"plugin(s) {', '.join(missing)} have no lab support", "leave them out of -p")
        return chosen
    return [installed[n] for n in sorted(installed) if lab_support(n) is not None]


def seed_sources(
    lab: Lab,
    plugins: Iterable[Plugin],
    scale: int = 1,
    echo: Callable[[str], None] = lambda _l: None,
    *,
    left_out: MutableMapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Seed ``lab`` through each plugin; plugin name -> the backup source mapping its seed returned.

    With ``left_out`` a plugin whose seed fails (a lab server that cannot run here) is left out, its reason
    printed and recorded there, instead of failing everything: the demo on a machine that has some of them
    still tells the whole story with the rest, and its rehearsals skip that plugin's steps with the reason.
    """
    sources: dict[str, dict[str, Any]] = {}
    for plugin in plugins:
        started = time.monotonic()
        try:
            sources[plugin.name] = dict(lab_support(plugin.name).seed(lab, scale))  # type: ignore[union-attr]
        except DrtoolError as exc:
            if left_out is None:
                raise
            left_out[plugin.name] = exc.one_line()
            echo(f"left out {plugin.name}: {exc.one_line()}")
            continue
        finally:
            lab.save()
        echo(f"seeded {plugin.name} in {time.monotonic() - started:.1f}s")
    return sources


def lab_target(plugins: Iterable[Plugin], root: Path | None = None, name: str | None = None) -> Target:
    """A new lab with what every plugin needs, and each plugin's target in it."""
    plugins = list(plugins)
    missing = [p.name for p in plugins if lab_support(p.name) is None]
    if missing:
        raise UsageError(
            f"plugin(s) {', '.join(missing)} cannot prepare a lab target (no LabSupport)",
            "rehearse into a real cluster with --target KUBECONFIG, or leave those steps out",
        )
    lab = Lab(name or f"rehearsal-{secrets.token_hex(3)}", root)
    try:  # each plugin starts what it needs, the way it needs it (an OpenBao target must stay uninitialized)
        overrides = {p.name: dict(lab_support(p.name).target(lab)) for p in plugins}  # type: ignore[union-attr]
        lab.save()
    except BaseException:
        stop_restored_servers(lab.root)
        lab.down()
        raise
    return Target(f"lab {lab.name}", overrides, lab)


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
    own list). A fresh lab is inside."""
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
    if target != "lab":
        overrides = kubeconfig_target(target, [p for _, p in steps]).overrides
        for step, plugin in steps:
            deps = restore_dependencies(repo, plugin, manifest, step_target(plan, step, overrides))
            found += [d.address for d in deps if d.kind == "endpoint"]
    return [f for f in dict.fromkeys(found) if f]
