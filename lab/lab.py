"""Named labs: a set of real servers whose state survives between `drtool lab` invocations.

State lives in ``$DRTOOL_LAB_DIR/<name>/lab.json`` (default ``~/.local/state/drtool/labs``).

Some servers need another one of the same lab (kube-apiserver stores into the lab's etcd): such a
component has ``requirements()`` (kinds) and ``link(peers)``; ``Lab.start`` starts what is required
first, then links, then starts, so the dependent always gets the address and TLS files its peer
actually serves with (an etcd's certificates exist only once it has started).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from drtool_lab.components import KINDS, Component
from drtool_lab.gomods import KUBE_VERSION, kube_release, lab_binaries

from drtool.errors import NotFound, UsageError

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# an API server and its etcd: objects are stored and served, nothing reconciles them
BARE_KINDS: tuple[str, ...] = ("etcd", "kube-apiserver")
# a cluster that runs (docs/lab.md "The living lab"): controllers, a scheduler, kwok's GPU nodes, Kueue,
# cert-manager; what `drtool lab up` starts by default
LIVING_KINDS: tuple[str, ...] = (
    *BARE_KINDS,
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "lab-node",
    "kueue",
    "cert-manager",
)

# control-plane servers that must match the API server's release: built for KUBE_VERSION only
DEFAULT_RELEASE_ONLY: tuple[str, ...] = ("kube-controller-manager", "kube-scheduler")


@runtime_checkable
class Linked(Protocol):
    """A component that runs against other components of its lab."""

    def requirements(self) -> tuple[str, ...]:
        """Kinds this component needs running in the same lab (none when pointed elsewhere explicitly)."""
        ...

    def link(self, peers: Mapping[str, Component]) -> None:
        """Take what it needs (addresses, client certificates) from the started ``peers``."""
        ...


def labs_root() -> Path:
    return Path(os.environ.get("DRTOOL_LAB_DIR", "~/.local/state/drtool/labs")).expanduser()


class Lab:
    """``kubernetes``: the Kubernetes release its API server runs (default ``KUBE_VERSION``). Another release
    runs bare: the lab's controller-manager and scheduler are built for ``KUBE_VERSION`` only, and a
    controller-manager newer than its API server is outside Kubernetes' version skew policy."""

    def __init__(self, name: str, root: Path | None = None, kubernetes: str = KUBE_VERSION) -> None:
        if not _NAME.match(name):
            raise UsageError(f"invalid lab name {name!r}", "use lowercase letters, digits and dashes")
        self.name = name
        self.root = (root or labs_root()) / name
        self.kubernetes = kube_release(kubernetes)
        self.components: dict[str, Component] = {}

    @property
    def state_file(self) -> Path:
        return self.root / "lab.json"

    @classmethod
    def load(cls, name: str, root: Path | None = None) -> Lab:
        lab = cls(name, root)
        if not lab.state_file.exists():
            raise NotFound(f"no lab named {name!r}", "start one with `drtool lab up --name NAME`")
        saved = json.loads(lab.state_file.read_text())
        lab.kubernetes = saved.get("kubernetes", KUBE_VERSION)
        for cname, state in saved["components"].items():
            lab.components[cname] = KINDS[state["kind"]].from_state(state)
        return lab

    @classmethod
    def names(cls, root: Path | None = None) -> list[str]:
        base = root or labs_root()
        return sorted(p.parent.name for p in base.glob("*/lab.json")) if base.is_dir() else []

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        state = {
            "name": self.name,
            "kubernetes": self.kubernetes,
            "components": {n: c.to_state() for n, c in self.components.items()},
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.touch(mode=0o600)  # holds lab-only server credentials (MinIO)
        tmp.write_text(json.dumps(state, indent=2))
        os.replace(tmp, self.state_file)

    def add(self, kind: str, name: str | None = None, **settings: object) -> Component:
        if kind not in KINDS:
            raise UsageError(f"unknown lab component {kind!r}", f"choose from {', '.join(sorted(KINDS))}")
        if self.kubernetes != KUBE_VERSION:
            if kind in DEFAULT_RELEASE_ONLY:
                raise UsageError(
                    f"lab {self.name} runs Kubernetes {self.kubernetes}: its {kind} is built for {KUBE_VERSION} only",
                    f"a lab of another Kubernetes release runs bare ({' + '.join(BARE_KINDS)})",
                )
            if kind == "kube-apiserver":
                settings.setdefault("kubernetes", self.kubernetes)
        cname = name or kind
        component = KINDS[kind](name=cname, dir=str(self.root / cname), **settings)
        self.components[cname] = component
        if isinstance(component, Linked) and all(self.first(k) for k in component.requirements()):
            component.link(self.components)  # usable at once; Lab.start links again (TLS files appear late)
        return component

    def up(self, kinds: Iterable[str] = BARE_KINDS) -> None:
        """Start the named kinds and what they require (those already running are left alone).

        Every named kind joins the lab before any starts, so a component can see what else it will run with
        (kube-apiserver turns ServiceAccount admission on when a kube-controller-manager will create the
        ServiceAccounts), and the Go-built binaries of the whole lab are built in one go first.
        State is saved after each start, so a failure half-way leaves a lab `drtool lab down` can stop.
        """
        wanted = [self.components.get(kind) or self.add(kind) for kind in kinds]
        lab_binaries({name for c in self.components.values() for name in c.binaries})
        for component in wanted:
            self.start(component)
        self.save()

    def start(self, component: Component) -> None:
        """Start one component of this lab unless it is healthy, after the components it requires."""
        if isinstance(component, Linked):
            for kind in component.requirements():
                peer = self.first(kind) or self.add(kind)
                self.start(peer)
            component.link(self.components)
        if not component.healthy():
            try:
                component.start()
            finally:
                self.save()

    def first(self, kind: str) -> Component | None:
        """The component named like ``kind``, else the first of that kind (a lab may hold several)."""
        named = self.components.get(kind)
        if named is not None and named.kind == kind:
            return named
        return next((c for c in self.components.values() if c.kind == kind), None)

    def down(self, *, purge: bool = True) -> None:
        # dependents first: an API server whose etcd vanished under it only fills its log with retries
        for component in reversed(self.components.values()):
            if purge:
                component.purge()
            else:
                component.stop()
        if purge:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            self.save()

    def env(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for component in self.components.values():
            merged |= component.env()
        return merged

    def __getitem__(self, name: str) -> Component:
        return self.components[name]
