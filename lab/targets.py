"""Labs made by the plugins' ``LabSupport``: seeded sources, and the fresh target a rehearsal restores into.

A fresh lab is a rehearsal's default target because a rehearsal must never write into something that
matters. Each plugin says which lab components it needs (``lab.kinds``), fills a source (``lab.seed``) and
returns the target mapping that points at an empty one (``lab.target``), so a new plugin with LabSupport is
seeded, backed up and rehearsed (`drtool lab seed`, `drtool demo`, `drtool rehearse`) with no change here.
The Kubernetes-reading plugins' support starts the living lab (controllers, Kueue, cert-manager), in the
source and in the target alike. ``LabTargets`` is the lab's rehearsal target provider (drtool.rehearsal.target),
registered as ``lab`` in the ``drtool.rehearsal_targets`` entry-point group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from drtool_lab.lab import Lab
from drtool_lab.support import lab_support, target_kinds

from drtool.errors import DrtoolError, UsageError
from drtool.plugin.contract import Plugin
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.rehearsal.target import Target, stop_restored_servers


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


def start_together(lab: Lab, kinds: Iterable[str]) -> None:
    """Start every server of ``kinds`` at once, before the plugins' seeds or targets, which then find them up.

    ``Lab.up`` starts those that need nothing else of the lab side by side: MLflow, OpenBao, MinIO and the
    registry beside the living lab (a source: 69 to 85 s against 92 to 122 s one plugin after another at load
    average 25). Should one not start, the plugin's own seed or target tries again and says why.
    """
    with contextlib.suppress(DrtoolError):
        lab.up(dict.fromkeys(kinds))


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


def teardown(lab: Lab) -> None:
    """Stop everything a rehearsal started in ``lab`` (servers restores started included); delete it."""
    stop_restored_servers(lab.root)
    lab.down()


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
    try:  # what can start side by side does; then each plugin starts the rest its own way (an uninitialized OpenBao)
        start_together(lab, (k for p in plugins for k in target_kinds(lab_support(p.name))))  # type: ignore[arg-type]
        overrides = {p.name: dict(lab_support(p.name).target(lab)) for p in plugins}  # type: ignore[union-attr]
        lab.save()
    except BaseException:
        teardown(lab)
        raise
    return Target(f"lab {lab.name}", overrides, lambda: teardown(lab))


@dataclasses.dataclass
class LabSource:
    """A lab as a rehearsal's source: every port of every server it runs is in the failure domain."""

    lab: Lab

    @property
    def name(self) -> str:
        return self.lab.name

    def endpoints(self) -> list[str]:
        return sorted(
            {
                f"127.0.0.1:{value}"
                for comp in self.lab.components.values()
                for key, value in dataclasses.asdict(comp).items()
                if key.endswith("port") and isinstance(value, int) and value > 0
            }
        )

    def stop(self) -> None:
        self.lab.down(purge=False)

    def start(self) -> None:
        self.lab.up(list(dict.fromkeys(c.kind for c in self.lab.components.values())))


class LabTargets:
    """The ``lab`` rehearsal target provider: a fresh lab per rehearsal, and labs by name as sources."""

    def provision(self, plugins: Sequence[Plugin], root: Path | None = None) -> Target:
        return lab_target(plugins, root)

    def source(self, name: str) -> LabSource:
        return LabSource(Lab.load(name))
