"""What every server drtool starts is (a lab's, or a trial one of a restore): a detached process with a state
folder, a health check and client settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from drtool.servers import process
from drtool.servers.provision import Provision


@dataclasses.dataclass
class Component:
    """A lab server. Subclasses add their ports and settings as fields, so state round-trips through JSON."""

    kind: ClassVar[str] = ""
    # binaries of the checked-in Go build modules it runs (drtool_lab.gomods): `Lab.up` builds them in one go
    binaries: ClassVar[tuple[str, ...]] = ()
    name: str
    dir: str
    pid: int | None = None

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def log_path(self) -> Path:
        return self.path / f"{self.kind}.log"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        process.stop(self.pid)
        self.pid = None

    def purge(self) -> None:
        """Stop and delete data kept outside the component's folder (the folder itself is the lab's)."""
        self.stop()

    def running(self) -> bool:
        return process.alive(self.pid)

    def healthy(self) -> bool:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """Environment variables that point a client (drtool, a test) at this server."""
        return {}

    def describe(self) -> str:
        """One line for `drtool lab status`: the address a person would connect to."""
        return ""

    @classmethod
    def provisions(cls) -> list[Provision]:
        """Where the programs it runs come from and whether they are here (`drtool lab doctor`), besides its Go
        builds (``binaries``, which the lab knows)."""
        return []

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Component:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in state.items() if k in fields})
