"""The files plugin's settings: which paths to back up, where to restore them."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, StrList


class Source(PluginSettings):
    paths: StrList = Field(default_factory=list, description="files and folders to back up (required)")
    force_read: bool = Field(False, description="read every file, even those unchanged since the parent backup")


class Target(PluginSettings):
    path: str | None = Field(None, description="a new, empty folder to restore into (required)")


class Options(PluginSettings):
    """The files restore takes no options."""


SCHEMA = Schema(source=Source, target=Target, option=Options)
