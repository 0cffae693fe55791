"""The checkpoints plugin's settings (docs/checkpoints.md): what `plan validate` and the config check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, SecretFile, StrList


class Location(PluginSettings):
    """An object store prefix or a folder."""

    url: str | None = Field(None, description="s3://BUCKET/PREFIX (or a folder)")
    path: str | None = Field(None, description="a folder")
    endpoint_url: str | None = Field(None, description="S3 endpoint")
    credentials_file: SecretFile | None = Field(None, description="AWS-style credentials file for the endpoint")


class Spec(Location):
    """One source location and what to look for in it."""

    name: str | None = Field(None, description="names the source in the backup; default from the URL")
    markers: StrList = Field(default_factory=list, description="files that mark a complete checkpoint")
    run: str | None = Field(None, description="the training run's folder")
    include: StrList = Field(default_factory=list, description="globs of what to back up")
    exclude: StrList = Field(default_factory=list, description="globs to leave out")
    milestones: StrList = Field(default_factory=list, description="checkpoints retention keeps")


class Source(Spec):
    sources: list[str | Spec] | None = Field(None, description="several locations (instead of url/path)")
    workers: int = Field(3, ge=1, description="objects backed up at once")
    retries: int = Field(2, ge=0, description="retries per object")
    reread: bool = Field(False, description="read every object, even unchanged ones")
    verify_source_checksums: bool = Field(True, description="compare with the store's own checksums")
    ranged_threshold: int | str | None = Field(None, description="objects this large are read in ranges (8MiB)")
    range_size: int | str | None = Field(None, description="bytes per ranged read")
    ranges_in_flight: int | None = Field(None, description="ranged reads at once")


class Options(PluginSettings):
    checkpoints: StrList = Field(default_factory=list, description="checkpoint names or globs; default all")
    source: str | None = Field(None, description="restore only this source, at the target's root")
    overwrite: bool = Field(False, description="replace objects that differ on the target")
    workers: int = Field(4, ge=1, description="objects restored at once")
    shard_count: int | None = Field(None, ge=1, description="a sharded restore's worker count")
    shard_index: int | None = Field(None, ge=0, description="this worker's index")
    job: str | None = Field(None, description="names the sharded restore")
    verify: Literal["sample", "full"] = Field(
        "sample", description="verification reads back a sample of what this restore wrote, or everything"
    )


SCHEMA = Schema(source=Source, target=Location, option=Options)
