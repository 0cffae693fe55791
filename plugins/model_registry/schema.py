"""The model-registry plugin's settings (docs/model-registry.md): what `plan validate` and the config check."""

from __future__ import annotations

from pydantic import Field

from drtool.plugin.settings import PluginSettings, Schema, SecretFile, StrList


class S3(PluginSettings):
    s3_endpoint: str | None = Field(None, description="S3 endpoint of the model files")
    s3_credentials_file: SecretFile | None = Field(None, description="AWS-style credentials file")
    s3_profile: str | None = Field(None, description="profile in that file")


class Source(S3):
    url: str | None = Field(None, description="the MLflow tracking server")
    models: StrList = Field(default_factory=list, description="registered models; default all")
    runs: bool = Field(True, description="back up the linked runs' data")


class Target(S3):
    url: str | None = Field(None, description="a (fresh) MLflow server")
    artifacts: str | None = Field(None, description="s3://BUCKET/PREFIX the model files are re-homed to")


class Options(PluginSettings):
    dry_run: bool = Field(False, description="say what would change, write nothing")


SCHEMA = Schema(source=Source, target=Target, option=Options)
