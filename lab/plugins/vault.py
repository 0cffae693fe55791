"""The vault plugin's lab support: a seeded OpenBao as the source, a fresh uninitialized one as the target.

Seeded: two KV v2 mounts (``secret`` with a custom max_versions, ``platform``) whose secrets have several
versions, one soft-deleted and one destroyed version, custom metadata; two ACL policies; the userpass
auth method with a user. The source settings name the lab server's ``init.json`` as the escrow
(``unseal_keys_file``) and a 0600 token file, as an operator would.
"""

from __future__ import annotations

from typing import Any

import hvac
from drtool_lab.lab import Lab
from drtool_plugins.vault.kv import wait_ready

from drtool.servers.openbao import OpenBaoServer

POLICIES = {
    "ml-reader": 'path "secret/data/ml/*" { capabilities = ["read", "list"] }\n',
    "platform-admin": 'path "platform/*" { capabilities = ["create", "read", "update", "delete", "list"] }\n',
}


def _server(lab: Lab, initialize: bool) -> OpenBaoServer:
    found = lab.first(OpenBaoServer.kind)
    if not isinstance(found, OpenBaoServer):
        found = lab.add(OpenBaoServer.kind, initialize=initialize)
    assert isinstance(found, OpenBaoServer)
    lab.start(found)
    lab.save()
    return found


def seed_content(client: hvac.Client, scale: int = 1) -> None:
    """Idempotent: mounts and policies are created once; secrets get their versions on the first run only."""
    mounts = client.sys.list_mounted_secrets_engines()["data"]
    kv = client.secrets.kv.v2
    for mount in ("secret", "platform"):
        if f"{mount}/" not in mounts:
            client.sys.enable_secrets_engine("kv", path=mount, options={"version": "2"}, description=f"{mount} KV")
        wait_ready(client, mount)
    kv.configure(max_versions=5, mount_point="secret")
    for name, text in POLICIES.items():
        client.sys.create_or_update_policy(name, text)
    if "userpass/" not in client.sys.list_auth_methods()["data"]:
        client.sys.enable_auth_method("userpass")
        client.write("auth/userpass/users/trainer", password="lab-only-password", token_policies="ml-reader")
    try:
        kv.read_secret_metadata("ml/mlflow-db", mount_point="secret")
        return
    except hvac.exceptions.InvalidPath:
        pass
    for v in range(3):
        kv.create_or_update_secret(
            "ml/mlflow-db", secret={"user": "mlflow", "password": f"pw-{v}"}, mount_point="secret"
        )
    kv.delete_secret_versions("ml/mlflow-db", versions=[1], mount_point="secret")
    kv.destroy_secret_versions("ml/mlflow-db", versions=[2], mount_point="secret")
    kv.update_metadata("ml/mlflow-db", custom_metadata={"owner": "ml-platform"}, mount_point="secret")
    kv.create_or_update_secret("ml/s3-checkpoints", secret={"key": "AKIA-LAB", "secret": "s3"}, mount_point="secret")
    for i in range(max(1, scale) * 5):
        kv.create_or_update_secret(f"teams/team-{i}/registry", secret={"token": f"t-{i}"}, mount_point="platform")
        kv.create_or_update_secret(f"teams/team-{i}/registry", secret={"token": f"t-{i}b"}, mount_point="platform")


class VaultLab:
    """``LabSupport`` for the vault plugin."""

    kinds = (OpenBaoServer.kind,)
    target_kinds: tuple[str, ...] = ()  # target() starts its OpenBao itself: it must stay uninitialized

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        server = _server(lab, initialize=True)
        seed_content(hvac.Client(url=server.address, token=server.root_token), scale)
        token_file = server.path / "token"
        token_file.touch(mode=0o600)
        token_file.write_text(server.root_token)
        return {"address": server.address, "token_file": str(token_file), "unseal_keys_file": str(server.init_file)}

    def target(self, lab: Lab) -> dict[str, Any]:
        return {"address": _server(lab, initialize=False).address}
