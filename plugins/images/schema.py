"""The images plugin's settings (docs/images.md): what `plan validate` and the config check."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import Schema, StrList
from drtool.plugin.toolkit.schema import Flag, KubeConnection, RegistrySource, RegistryTarget


class Source(KubeConnection, RegistrySource):
    images: StrList = Field(default_factory=list, description="image references to copy")
    scan_workloads: Flag = Field(None, description="copy what the cluster's workloads run (default: with kubeconfig)")
    registries: StrList = Field(default_factory=list, description="host globs to copy from; default every host")
    referrers: Flag = Field(None, description="copy signatures, SBOMs and other referrers (default true)")
    workers: int = Field(4, ge=1, description="blobs copied at once")


class Options(RegistryTarget):
    pass


SCHEMA = Schema(source=Source, target=Options, option=Options)
