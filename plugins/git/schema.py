"""The git plugin's settings (docs/git.md): what `plan validate` and the config check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, StrList


class Repo(PluginSettings):
    url: str = Field(description="the repository")
    name: str | None = Field(None, description="names its artifact; default from the URL")


class Source(PluginSettings):
    repos: list[str | Repo] | StrList = Field(default_factory=list, description="URLs or {name, url} mappings")
    url: str | None = Field(None, description="one repository (instead of repos)")
    lfs: Literal["auto", "skip"] = Field("auto", description="back up Git LFS objects when the remote has them")


class Target(PluginSettings):
    """Exactly one of url or path; with several repositories it holds {name}."""

    url: str | None = Field(None, description="push into this (empty) remote")
    path: str | None = Field(None, description="create a bare repository here")
    repos: StrList = Field(default_factory=list, description="restore only these repositories")


class Options(PluginSettings):
    repos: StrList = Field(default_factory=list, description="restore only these repositories")
    force: bool = Field(False, description="let a push rewrite diverged branches")
    dry_run: bool = Field(False, description="say what would be done, write nothing")


SCHEMA = Schema(source=Source, target=Target, option=Options)
