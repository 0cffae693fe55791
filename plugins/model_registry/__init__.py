"""The model-registry plugin: an MLflow model registry, with the files of every version, into a fresh MLflow.

Backs up registered models (description, tags, aliases), every READY version (source, run linkage, tags,
stage, status, description), the linked runs' experiment, name, params, latest metrics and tags, and the
files each version's source points to (through MLflow's artifact proxy or straight from S3). Restores
into another MLflow server with the files re-homed to an S3 bucket/prefix and the sources rewritten.

Source settings: ``url``, ``models``, ``runs``, ``s3_endpoint``, ``s3_credentials_file``, ``s3_profile``.
Target settings: ``url``, ``artifacts`` (``s3://bucket/prefix``) and the same ``s3_*``. Restore option:
``dry_run``. Secrets never inline: MLFLOW_TRACKING_TOKEN (or _USERNAME/_PASSWORD) from the environment, S3
keys from a credentials file or boto3's chain. docs/model-registry.md explains each, and what MLflow
cannot reproduce.
"""

from __future__ import annotations

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["ModelRegistryPlugin"]


class ModelRegistryPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for MLflow's model registry (REST API 2.0)."""

    name = "model-registry"
    description = "MLflow model registry: models, versions, aliases, stages, linked runs and version files"
    schema = SCHEMA
    discover = staticmethod(_backup.discover)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_deps.dependencies)
