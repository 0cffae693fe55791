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
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
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
# operators a living lab runs only when asked (`drtool lab up --with kuberay`, `--with argocd`, `--with trainer`,
# which brings jobset): their builds are minutes each, and ordinary labs and tests do not need them
OPT_IN_KINDS: tuple[str, ...] = ("kuberay", "argocd", "jobset", "trainer")

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
        self._saving = threading.Lock()  # components starting side by side save the state as each one is up

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
        with self._saving:
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
        Components whose requirements are up start side by side: a start is mostly waiting for a health
        check, and the living lab's six controllers need only the API server (4 to 16 s less per living
        lab on a busy 2-core machine). State is saved after each start, so a failure half-way leaves a lab
        `drtool lab down` can stop.
        """
        wanted = [self.components.get(kind) or self.add(kind) for kind in kinds]
        waves = self._waves(wanted)
        lab_binaries({name for c in self.components.values() for name in c.binaries})
        for wave in waves:
            self._start_together(wave)
        self.save()

    def _waves(self, components: Iterable[Component], *, add: bool = True) -> list[list[Component]]:
        """``components`` and what they require (added to the lab if missing, unless ``add`` is false), in
        waves: each component comes one wave after the last of its requirements."""
        depth: dict[int, tuple[Component, int]] = {}  # by identity: a caller may file one under another name

        def place(component: Component) -> int:
            if id(component) not in depth:
                required = component.requirements() if isinstance(component, Linked) else ()
                found = [self.first(kind) or (self.add(kind) if add else None) for kind in required]
                peers = [peer for peer in found if peer is not None]
                depth[id(component)] = (component, 1 + max((place(p) for p in peers), default=-1))
            return depth[id(component)][1]

        for component in components:
            place(component)
        waves: list[list[Component]] = [[] for _ in range(max((d for _, d in depth.values()), default=-1) + 1)]
        for component, level in depth.values():
            waves[level].append(component)
        return waves

    def _start_together(self, wave: list[Component]) -> None:
        """Start the components of one wave at once (their requirements run: earlier waves started them, and
        no thread checks or starts them again); every start runs to its end before the first failure is
        raised, so the state names everything that runs."""
        with ThreadPoolExecutor(max_workers=len(wave), thread_name_prefix=f"lab-{self.name}") as pool:
            starts = [pool.submit(self._launch, component) for component in wave]
        for start in starts:
            start.result()

    def start(self, component: Component) -> None:
        """Start one component of this lab unless it is healthy, after the components it requires."""
        if isinstance(component, Linked):
            for kind in component.requirements():
                peer = self.first(kind) or self.add(kind)
                self.start(peer)
        self._launch(component)

    def _launch(self, component: Component) -> None:
        """Start ``component`` unless it is healthy; what it requires runs already."""
        if isinstance(component, Linked):
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
        # dependents first: an API server whose etcd vanished under it only fills its log with retries; the
        # components of one wave stop side by side (a stop waits for the process to exit: a lab's dozen one
        # after another took about 20 s of each demo rehearsal's teardown)
        for wave in reversed(self._waves(list(self.components.values()), add=False)):
            with ThreadPoolExecutor(max_workers=len(wave), thread_name_prefix=f"lab-{self.name}-down") as pool:
                stops = [pool.submit(component.purge if purge else component.stop) for component in wave]
            for stop in stops:
                stop.result()
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
