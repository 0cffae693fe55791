"""Named labs: a set of real servers whose state survives between `drtool lab` invocations.

State lives in ``$DRTOOL_LAB_DIR/<name>/lab.json`` (default ``~/.local/state/drtool/labs``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from drtool.errors import NotFound, UsageError
from drtool.lab.components import KINDS, Component

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


def labs_root() -> Path:
    return Path(os.environ.get("DRTOOL_LAB_DIR", "~/.local/state/drtool/labs")).expanduser()


class Lab:
    def __init__(self, name: str, root: Path | None = None) -> None:
        if not _NAME.match(name):
            raise UsageError(f"invalid lab name {name!r}", "use lowercase letters, digits and dashes")
        self.name = name
        self.root = (root or labs_root()) / name
        self.components: dict[str, Component] = {}

    @property
    def state_file(self) -> Path:
        return self.root / "lab.json"

    @classmethod
    def load(cls, name: str, root: Path | None = None) -> Lab:
        lab = cls(name, root)
        if not lab.state_file.exists():
            raise NotFound(f"no lab named {name!r}", "start one with `drtool lab up --name NAME`")
        for cname, state in json.loads(lab.state_file.read_text())["components"].items():
            lab.components[cname] = KINDS[state["kind"]].from_state(state)
        return lab

    @classmethod
    def names(cls, root: Path | None = None) -> list[str]:
        base = root or labs_root()
        return sorted(p.parent.name for p in base.glob("*/lab.json")) if base.is_dir() else []

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        state = {"name": self.name, "components": {n: c.to_state() for n, c in self.components.items()}}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.touch(mode=0o600)  # holds lab-only server credentials (MinIO)
        tmp.write_text(json.dumps(state, indent=2))
        os.replace(tmp, self.state_file)

    def add(self, kind: str, name: str | None = None, **settings: object) -> Component:
        if kind not in KINDS:
            raise UsageError(f"unknown lab component {kind!r}", f"choose from {', '.join(sorted(KINDS))}")
        cname = name or kind
        component = KINDS[kind](name=cname, dir=str(self.root / cname), **settings)
        self.components[cname] = component
        return component

    def up(self, kinds: Iterable[str] = ("etcd",)) -> None:
        """Start the named kinds (those already running are left alone); state is saved after each start."""
        for kind in kinds:
            component = self.components.get(kind) or self.add(kind)
            if not component.healthy():
                try:
                    component.start()
                finally:
                    self.save()
        self.save()

    def down(self, *, purge: bool = True) -> None:
        for component in self.components.values():
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
