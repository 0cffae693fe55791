"""The kubernetes plugin's settings (docs/kubernetes.md): what `plan validate` and the config check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drtool.plugin.settings import Schema, StrList
from drtool.plugin.toolkit.schema import Flag, KubeConnection, KubeRestoreMapped


class Source(KubeConnection):
    include_namespaces: StrList = Field(default_factory=list, description="namespace globs to back up; default all")
    exclude_namespaces: StrList = Field(default_factory=list, description="namespace globs to leave out")
    include_resources: StrList = Field(default_factory=list, description="resource.group globs; default all")
    exclude_resources: StrList = Field(default_factory=list, description="resource.group globs to leave out")
    label_selector: str | None = Field(None, description="applied by the API server to every LIST")
    cluster_resources: bool | Literal["auto"] | None = Field(
        None, description="cluster-scoped types; auto: yes unless include_namespaces narrows the backup"
    )
    default_skips: Flag = Field(None, description="skip what a new cluster makes itself (default true)")
    page_size: int = Field(500, ge=1, description="objects per LIST page")
    workers: int = Field(4, ge=1, description="resource types listed at once")


class Options(KubeRestoreMapped):
    pass


class Target(KubeConnection, KubeRestoreMapped):
    """The cluster to restore into; restore options may sit here too (the plugin reads both)."""


SCHEMA = Schema(source=Source, target=Target, option=Options)
