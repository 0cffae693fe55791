"""A git server on loopback: ``git daemon`` serving bare repositories over git://, pushes allowed.

The git plugin's source and its restore target in tests and labs. ``git daemon`` cannot create
repositories, so ``create_repo`` makes an empty bare one (the "new remote" a restore pushes into).
Unauthenticated and loopback-only: a lab server, never exposed.
"""

from __future__ import annotations

import dataclasses
import socket
import subprocess
from pathlib import Path

from drtool.environ import child_env
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, debian


@dataclasses.dataclass
class GitServer(Component):
    kind = "git"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [debian("git", "git", lambda: process.which_or_fail("git", "apt-get install git"))]

    port: int = 0

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()

    @property
    def base(self) -> Path:
        return self.path / "repos"

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}"

    def repo_url(self, name: str) -> str:
        return f"{self.url}/{name}.git"

    def argv(self) -> list[str]:
        git = process.which_or_fail("git", "apt-get install git")
        return [
            git,
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            f"--base-path={self.base}",
            "--listen=127.0.0.1",
            f"--port={self.port}",
            str(self.base),
        ]

    def start(self, timeout: float = 30.0) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.pid = process.spawn(self.argv(), self.log_path)
        process.wait_until(self.healthy, timeout, f"git daemon {self.name} at {self.url}", self.log_path)

    def healthy(self) -> bool:
        if not self.running():
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                return True
        except OSError:
            return False

    def create_repo(self, name: str) -> str:
        """An empty bare repository ``<name>.git`` served by this daemon; returns its URL."""
        path = self.base / f"{name}.git"
        if not path.exists():
            env = child_env()
            subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True, timeout=30, env=env)
            # accept the restore's forced updates and deletions of refs like a hosted server does
            config = ["git", "-C", str(path), "config", "receive.denyNonFastForwards", "false"]
            subprocess.run(config, check=True, timeout=30, env=env)
        return self.repo_url(name)

    def env(self) -> dict[str, str]:
        return {"DRTOOL_GIT_URL": self.url}

    def describe(self) -> str:
        return self.url
