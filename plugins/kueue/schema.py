"""The kueue plugin's settings (docs/kueue.md): what `plan validate` and the config check."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import Schema, StrList
from drtool.plugin.toolkit.schema import Flag, KubeConnection, KubeRestore


class Source(KubeConnection):
    kueue_namespace: str = Field("kueue-system", description="where the Kueue manager runs")
    page_size: int = Field(500, ge=1, description="objects per LIST page")


class Options(KubeRestore):
    allow_missing: StrList = Field(default_factory=list, description="reference kinds that may stay unresolved")
    install_crds: Flag = Field(None, description="install Kueue's CRDs when the target lacks them (default true)")


class Target(KubeConnection, Options):
    """The cluster to restore into; restore options may sit here too (the plugin reads both)."""


SCHEMA = Schema(source=Source, target=Target, option=Options)
