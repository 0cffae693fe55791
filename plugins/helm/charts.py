"""Helm charts: classic ``index.yaml`` repositories (read), and charts as OCI artifacts (written).

A classic repository is an ``index.yaml`` listing each chart version with its ``urls`` and ``digest`` (the
SHA-256 of the ``.tgz``); archives are streamed into the store and checked against that digest. A restore
pushes every chart to an OCI registry in Helm's own OCI layout (what ``helm push`` writes): a config blob
holding the chart's metadata as JSON (``application/vnd.cncf.helm.config.v1+json``), one layer holding the
``.tgz`` (``application/vnd.cncf.helm.chart.content.v1.tar+gzip``), tagged with the chart version (``+`` is
not allowed in tags and becomes ``_``, as Helm does), so ``helm pull oci://...`` works against the target.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from drtool import yamlio
from drtool.errors import IntegrityError, SourceError
from drtool.plugin.toolkit.oci.registry import CHUNK, OCI_MANIFEST, TIMEOUT, Registry, sha256_digest

HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MAX_INDEX = 64 << 20


def repo_key(url: str) -> str:
    """A stable, path-safe name for a repository URL (``charts.example.com_stable``)."""
    parts = urlsplit(url)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{parts.netloc}{parts.path}".strip("/")) or "repo"


def _get(url: str, stream: bool = False) -> requests.Response:
    try:
        resp = requests.get(url, timeout=TIMEOUT, stream=stream)
    except requests.RequestException as exc:
        raise SourceError(f"chart repository {url} unreachable: {type(exc).__name__}", "is the URL right?") from None
    if resp.status_code != 200:
        raise SourceError(f"chart repository: GET {url}: {resp.status_code}", "is the URL right?")
    return resp


def fetch_index(url: str) -> tuple[bytes, dict[str, Any]]:
    """(raw bytes, parsed) of ``<url>/index.yaml``."""
    data = _get(urljoin(url.rstrip("/") + "/", "index.yaml")).content
    if len(data) > MAX_INDEX:
        raise SourceError(f"chart repository {url}: index.yaml is larger than 64 MiB")
    parsed = yamlio.loads(data) or {}
    if not isinstance(parsed.get("entries"), dict):
        raise SourceError(f"chart repository {url}: index.yaml has no entries", "is it a Helm chart repository?")
    return data, parsed


def chart_url(repo_url: str, entry: dict[str, Any]) -> str:
    urls = entry.get("urls") or []
    if not urls:
        raise SourceError(f"chart {entry.get('name')} {entry.get('version')} has no urls in its index.yaml")
    return urljoin(repo_url.rstrip("/") + "/", urls[0])


def download(url: str, digest: str | None) -> Iterator[bytes]:
    """A chart archive in chunks; checked at the end against the index's ``digest`` when it has one."""
    h = hashlib.sha256()
    with _get(url, stream=True) as resp:
        for chunk in resp.iter_content(CHUNK):
            h.update(chunk)
            yield chunk
    if digest and h.hexdigest() != digest.removeprefix("sha256:"):
        raise IntegrityError(f"chart {url} does not match the digest its index.yaml gives", "the repository changed?")


def metadata_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The chart's ``Chart.yaml`` fields: an index entry is the chart's metadata plus where and when."""
    return {k: v for k, v in entry.items() if k not in ("urls", "created", "digest", "removed")}


def oci_tag(version: str) -> str:
    return version.replace("+", "_")


def push_chart(
    reg: Registry,
    repository: str,
    metadata: dict[str, Any],
    digest: str,
    size: int,
    chunks: Iterator[bytes],
    dry_run: bool = False,
) -> tuple[str, bool]:
    """Push a chart as Helm's OCI artifact; returns (manifest digest, whether anything was (or would be) written)."""
    config = json.dumps(metadata, separators=(",", ":"), sort_keys=True).encode()
    config_digest = sha256_digest(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": HELM_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": HELM_CHART, "digest": digest, "size": size}],
        "annotations": {
            "org.opencontainers.image.title": str(metadata.get("name", "")),
            "org.opencontainers.image.version": str(metadata.get("version", "")),
        },
    }
    data = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    manifest_digest = sha256_digest(data)
    tag = oci_tag(str(metadata.get("version", "latest")))
    if reg.manifest_digest(repository, tag) == manifest_digest:
        return manifest_digest, False
    if dry_run:
        return manifest_digest, True
    if not reg.has_blob(repository, config_digest):
        reg.push_blob(repository, config_digest, [config])
    if not reg.has_blob(repository, digest):
        reg.push_blob(repository, digest, chunks)
    reg.put_manifest(repository, tag, data, OCI_MANIFEST)
    return manifest_digest, True
