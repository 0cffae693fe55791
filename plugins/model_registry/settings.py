"""The model-registry plugin's settings: source (backup), target and options (restore)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.toolkit import paths
from drtool.plugin.toolkit.settings import as_bool, as_list

from .artifacts import S3Settings, split_s3


@dataclasses.dataclass(frozen=True)
class Source:
    """``url``: the tracking server; ``models``: only these registered models (default all);
    ``s3_*``: for versions whose files are in S3 directly; ``runs``: back up the linked runs' data."""

    url: str
    models: tuple[str, ...] = ()
    s3: S3Settings = dataclasses.field(default_factory=S3Settings)
    runs: bool = True

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Source:
        url = str(m.get("url") or "")
        if not url:
            raise UsageError("model-registry source has no url", "set url: http://MLFLOW_HOST:PORT in sources")
        return cls(url, tuple(as_list(m.get("models"))), S3Settings.from_mapping(m), as_bool(m.get("runs"), True))


@dataclasses.dataclass(frozen=True)
class Target:
    """``url``: a (fresh) MLflow server; ``artifacts``: ``s3://BUCKET/PREFIX`` the files are re-homed to
    (each version under ``PREFIX/<model>/<version>/``); ``s3_*``: that store's endpoint and credentials."""

    url: str
    artifacts: str
    s3: S3Settings = dataclasses.field(default_factory=S3Settings)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Target:
        url, artifacts = str(m.get("url") or ""), str(m.get("artifacts") or "").rstrip("/")
        if not url or not artifacts:
            raise UsageError(
                "model-registry target needs url and artifacts",
                "-t url=http://MLFLOW:PORT -t artifacts=s3://bucket/prefix [-t s3_endpoint=http://S3:PORT]",
            )
        split_s3(artifacts)
        return cls(url, artifacts, S3Settings.from_mapping(m))

    def version_uri(self, model: str, version: str, rel: str) -> str:
        """Where a restored version's files go; ``rel`` keeps the last part of the original source path."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        if safe != model:  # keep two names that differ only in such characters apart
            safe += "-" + hashlib.sha256(model.encode()).hexdigest()[:8]
        # all three come from the backup: each must be one plain key segment under ``artifacts``
        parts = [paths.segment(p, f"model-registry: {what}") for p, what in ((safe, "model"), (version, "version"))]
        if rel:
            parts.append(paths.segment(rel, "model-registry: artifact folder"))
        return "/".join([self.artifacts, *parts])
