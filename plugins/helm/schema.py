"""The helm plugin's settings (docs/helm.md): what `plan validate` and the config check."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, StrList
from drtool.plugin.toolkit.schema import Flag, KubeConnection, RegistrySource, RegistryTarget


class Repository(PluginSettings):
    url: str = Field(description="the chart repository")
    charts: StrList = Field(default_factory=list, description="charts whose newest version is kept too")


class Source(KubeConnection, RegistrySource):
    namespaces: StrList = Field(default_factory=list, description="namespaces of releases; default all")
    repositories: list[str | Repository] = Field(default_factory=list, description="chart repositories")
    oci_charts: StrList = Field(default_factory=list, description="charts in OCI registries")
    releases: Flag = Field(None, description="back up release records (default: when a kubeconfig is given)")
    all_versions: Flag = Field(None, description="every chart version, not only those in use")


class Options(RegistryTarget):
    pass


class Target(KubeConnection, RegistryTarget):
    """The cluster for release records and the registry for charts; options may sit here too."""


SCHEMA = Schema(source=Source, target=Target, option=Options)
