"""Helm 3 release records as Helm stores them: Secrets ``sh.helm.release.v1.<name>.v<revision>``.

The Secret's ``data.release`` holds base64(gzip(JSON of release.Release)); the Kubernetes API base64-encodes
Secret data once more, so a Secret read as JSON carries it twice encoded. Helm finds its records by the
labels ``owner=helm``, ``name``, ``status`` and ``version`` and ignores Secrets without them, so a restore
must keep the labels exactly, not only the data.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

SECRET_TYPE = "helm.sh/release.v1"
SELECTOR = "owner=helm"
GZIP_MAGIC = b"\x1f\x8b\x08"


def decode(secret: dict[str, Any]) -> dict[str, Any]:
    """The release JSON inside a Secret as the API returns it (``data.release`` base64 of the record)."""
    record = base64.b64decode(secret["data"]["release"])
    raw = base64.b64decode(record)
    if raw[:3] == GZIP_MAGIC:
        raw = gzip.decompress(raw)
    return json.loads(raw)


def encode(release: dict[str, Any]) -> str:
    """``data.release`` for a Secret: base64 of Helm's record, base64(gzip(JSON))."""
    record = base64.b64encode(gzip.compress(json.dumps(release).encode(), mtime=0))
    return base64.b64encode(record).decode()


def summary(release: dict[str, Any]) -> dict[str, Any]:
    """What a report shows of one revision: chart, version, status; never the values (they may hold secrets)."""
    meta = (release.get("chart") or {}).get("metadata") or {}
    return {
        "name": release.get("name"),
        "namespace": release.get("namespace"),
        "revision": release.get("version"),
        "status": (release.get("info") or {}).get("status"),
        "chart": meta.get("name"),
        "chart_version": meta.get("version"),
        "app_version": meta.get("appVersion"),
    }


def secret_name(name: str, revision: int) -> str:
    return f"sh.helm.release.v1.{name}.v{revision}"


def labels(release: dict[str, Any]) -> dict[str, str]:
    """The labels Helm's Secret driver sets and queries by."""
    return {
        "owner": "helm",
        "name": str(release["name"]),
        "status": str((release.get("info") or {}).get("status", "")),
        "version": str(release["version"]),
    }
