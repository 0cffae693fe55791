"""What a model-registry restore contacts and what the restored registry points at (independence analysis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import Dependency, RestoreContext

from .restore import load
from .settings import Target


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    """The target MLflow and object store (contacted), the new version sources and run links (carried)."""
    settings = Target.from_mapping(target)
    document = load(ctx)
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
