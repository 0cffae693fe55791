"""The vault plugin's settings (docs/vault.md): what `plan validate` and the config check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, SecretFile, StrList


class Target(PluginSettings):
    """The server (Vault or OpenBao) and where its token is; never the token itself."""

    address: str | None = Field(None, description="e.g. https://vault:8200 (or VAULT_ADDR)")
    token_env: str | None = Field(None, description="variable holding the token (default VAULT_TOKEN)")
    token_file: SecretFile | None = Field(None, description="file holding the token")
    cacert: str | None = Field(None, description="CA certificate file (or VAULT_CACERT)")


class Source(Target):
    unseal_keys_file: SecretFile | None = Field(None, description="file with the unseal keys (bao init's JSON)")
    unseal_keys_env: str | None = Field(None, description="variable holding the unseal keys")
    escrow_root_token: bool = Field(True, description="escrow the root token with the unseal keys")
    snapshot: bool = Field(True, description="take a raft snapshot")
    kv_mounts: StrList | None = Field(None, description="KV v2 mounts to export; default every one")


class Options(PluginSettings):
    mode: Literal["snapshot", "kv"] | None = Field(None, description="default snapshot when the backup has one")
    trial: Literal["auto", "true", "false"] | bool = Field("auto", description="trial-restore into a throwaway bao")
    existing: Literal["update", "skip", "fail"] = Field("update", description="a secret the target has (mode=kv)")
    mounts: StrList = Field(default_factory=list, description="restore only these KV mounts")
    dry_run: bool = Field(False, description="say what would change, write nothing")


SCHEMA = Schema(source=Source, target=Target, option=Options)
