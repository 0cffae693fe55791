"""The dns-certs plugin's settings (docs/dns-certs.md): what `plan validate` and the config check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, SecretFile, StrList
from drtool.plugin.toolkit.schema import Flag, KubeConnection, KubeRestoreMapped


class Dns(PluginSettings):
    kubernetes: Flag = Field(None, description="the cert-manager, CoreDNS and ExternalDNS objects (default true)")
    dns_server: str | None = Field(None, description="authoritative server, host or host:port")
    tsig_key_file: SecretFile | None = Field(None, description="BIND TSIG key file (tsig-keygen output)")
    dns_timeout: float | None = Field(None, description="seconds per DNS exchange")


class Source(KubeConnection, Dns):
    zones: StrList = Field(default_factory=list, description="zones to transfer (AXFR)")
    cluster_resource_namespace: str = Field("cert-manager", description="where ClusterIssuers' Secrets live")
    page_size: int = Field(500, ge=1, description="objects per LIST page")


class Options(Dns, KubeRestoreMapped):
    zone_dir: str | None = Field(None, description="write zones as files here")
    externaldns: Literal["keep", "hold", "release"] = Field("keep", description="ExternalDNS during cutover")
    rto: str | int | None = Field(None, description="the restore's RTO: certificates must outlive it")
    expiry_margin: str | int | None = Field(None, description="warn for certificates expiring within (14d)")
    cutover: dict[str, str] | str | None = Field(None, description="old=new load balancer addresses")
    serial: Literal["backup", "raise"] = Field(
        "backup", description="raise: a zone changed in place gets the backup's records under a higher serial"
    )


class Target(KubeConnection, Options):
    """The cluster and DNS server to restore into; options may sit here too (the plugin reads both)."""


SCHEMA = Schema(source=Source, target=Target, option=Options)
