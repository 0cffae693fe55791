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

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult

from . import backup as _backup
from . import restore as _restore
from . import verify as _verify
from .lab import MlflowLab
from .settings import Target

__all__ = ["ModelRegistryPlugin"]


class ModelRegistryPlugin:
    """Implements ``drtool.plugin.contract.Plugin`` for MLflow's model registry (REST API 2.0)."""

    name = "model-registry"
    description = "MLflow model registry: models, versions, aliases, stages, linked runs and version files"
    lab = MlflowLab()  # drtool.plugin.contract.LabSupport: seed a lab MLflow, prepare an empty one

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _verify.run_verify(ctx, target, options)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        """The target MLflow and object store (contacted), the new version sources and run links (carried)."""
        settings = Target.from_mapping(target)
        document = _restore.load(ctx)
        deps = [
            Dependency("endpoint", settings.url, "MLflow server the registry is restored into", "target url"),
            Dependency(
                "endpoint",
                settings.s3.client().meta.endpoint_url,
                "object store the version files are written to",
                "target s3_endpoint (else MLFLOW_S3_ENDPOINT_URL / AWS_ENDPOINT_URL)",
            ),
            Dependency(
                "credential",
                settings.s3.credentials_file or f"boto3 credential chain (profile {settings.s3.profile or 'default'})",
                "write access to the target bucket",
                "target s3_credentials_file / s3_profile",
            ),
            Dependency("reference", settings.artifacts, "restored model versions' sources point here", "target"),
        ]
        for model in document["models"]:
            for mv in model["versions"]:
                if mv["run_link"]:
                    what = f"model {model['name']} version {mv['version']} run_link"
                    deps.append(Dependency("reference", mv["run_link"], "link carried by a restored version", what))
        return deps
