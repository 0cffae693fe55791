"""The etcd plugin's settings (docs/etcd.md): what `plan validate` and the config check."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, SecretFile, StrList


class Source(PluginSettings):
    """The cluster backed up; unset keys come from the lab's ETCD_* variables."""

    endpoints: StrList = Field(default_factory=list, description="client URLs (or ETCD_ENDPOINTS)")
    cacert: str | None = Field(None, description="CA certificate file of the client URLs")
    cert: str | None = Field(None, description="client certificate file")
    key: SecretFile | None = Field(None, description="client key file")
    timeout: float | None = Field(None, description="seconds per request")


class Target(Source):
    """The new member, and optionally the live cluster verify compares with."""

    data_dir: str | None = Field(None, description="a new, empty (or missing) data directory")
    name: str | None = Field(None, description="the restored member's name (default restored)")
    initial_cluster_token: str | None = Field(None, description="the new cluster's token (default random)")
    peer_url: str | None = Field(None, description="advertised peer URL")
    client_url: str | None = Field(None, description="advertised client URL")
    peer_port: int | None = Field(None, description="peer port on 127.0.0.1 (instead of peer_url)")
    client_port: int | None = Field(None, description="client port on 127.0.0.1 (instead of client_url)")
    start: bool = Field(False, description="start and health-check the restored member")
    tls: bool = Field(False, description="the started member serves TLS")
    component_dir: str | None = Field(None, description="where the started member keeps its files")
    lab_dir: str | None = Field(None, description="a lab's folder for the started member")
    compare_with: Source | None = Field(None, description="a live cluster verify compares the restore with")


class Options(PluginSettings):
    bump_revision: int | bool = Field(True, description="revisions added so watchers relist (true: 1e9)")
    require_bump_revision: bool = Field(False, description="fail when this etcdutl cannot bump")
    workdir: str | None = Field(None, description="scratch folder of a point-in-time replay")


SCHEMA = Schema(source=Source, target=Target, option=Options)
