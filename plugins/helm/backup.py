"""Back up Helm: release records (their storage Secrets), charts from classic repositories and OCI registries.

- ``releases.ndjson`` (sensitive: the values of a release may hold passwords): every Secret of type
  ``helm.sh/release.v1`` labelled ``owner=helm``, with its labels and data exactly, one per line. Every
  revision is kept, so ``helm history`` and ``helm rollback`` work after a restore.
- classic repositories: ``repos/<key>/index.yaml`` and ``charts/<key>/<name>-<version>.tgz`` for every
  chart version a backed-up release uses (``all_versions``: every version listed), checked against the
  index's digest;
- OCI charts (``oci://host/repo/chart:version``): copied by digest with the toolkit's OCI copier
  (``drtool.plugin.toolkit.oci.pull``).
``charts.json`` records what a restore pushes. The manifest facts list each release's revisions with chart
and status, never values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from drtool.errors import DrtoolError, SourceError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.settings import Connection
from drtool.plugin.contract import BackupContext, Inventory
from drtool.plugin.toolkit.oci.pull import Copier
from drtool.plugin.toolkit.oci.refs import parse
from drtool.plugin.toolkit.oci.settings import SourceSettings as ImageSettings
from drtool.plugin.toolkit.settings import as_bool, as_list

from . import charts as _charts
from .release import SECRET_TYPE, SELECTOR, decode, summary

RELEASES = "releases.ndjson"
INDEX = "charts.json"
FORMAT = "drtool-helm-v1"


def _secrets(client: KubeClient, namespaces: list[str]) -> Iterator[dict[str, Any]]:
    params = {"labelSelector": SELECTOR, "fieldSelector": f"type={SECRET_TYPE}"}
    paths = [f"/api/v1/namespaces/{ns}/secrets" for ns in namespaces] or ["/api/v1/secrets"]
    try:
        for path in paths:
            for page in client.list_pages(path, params):
                yield from page.get("items") or []
    except ApiError as exc:
        raise SourceError(f"listing Helm release Secrets: {exc.message}", exc.hint) from None


def _clean(secret: dict[str, Any]) -> dict[str, Any]:
    meta = secret["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": meta.get("labels") or {}},
        "type": secret.get("type", SECRET_TYPE),
        "data": secret.get("data") or {},
    }


def backup_releases(ctx: BackupContext, source: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Stream every release Secret into ``releases.ndjson``; returns each revision's summary."""
    client = KubeClient(Connection.from_mapping(source))
    revisions = []
    with ctx.artifact(RELEASES, meta={"format": "ndjson-secrets-v1"}, sensitive=True) as sink:
        for secret in _secrets(client, as_list(source.get("namespaces"))):
            try:
                revisions.append(summary(decode(secret)))
            except (ValueError, KeyError, OSError) as exc:
                name = f"{secret['metadata'].get('namespace')}/{secret['metadata'].get('name')}"
                raise SourceError(f"Helm release Secret {name} does not decode: {exc}", "is it Helm 3's?") from None
            sink.write(json.dumps(_clean(secret), sort_keys=True).encode() + b"\n")
    return revisions


def _repositories(source: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``repositories``: URLs, or mappings ``{url, charts: [names]}`` (named charts' newest version is kept too)."""
    out = []
    for item in source.get("repositories") or []:
        repo = {"url": item} if isinstance(item, str) else dict(item)
        if not repo.get("url"):
            raise SourceError("a Helm repository entry has no url", "use `repositories: [https://charts.example/]`")
        out.append(repo)
    return out


def backup_repository(
    ctx: BackupContext, repo: Mapping[str, Any], used: set[tuple[str, str]], all_versions: bool
) -> dict[str, Any]:
    url, key = str(repo["url"]), _charts.repo_key(str(repo["url"]))
    raw, index = _charts.fetch_index(url)
    with ctx.artifact(f"repos/{key}/index.yaml", meta={"url": url}) as sink:
        sink.write(raw)
    named = set(as_list(repo.get("charts")))
    kept = []
    for name, entries in sorted(index["entries"].items()):
        newest = entries[0]["version"] if entries else None  # index.yaml lists newest first
        for entry in entries:
            version = str(entry["version"])
            if not (all_versions or (name, version) in used or (name in named and version == newest)):
                continue
            artifact = f"charts/{key}/{name}-{version}.tgz"
            size = 0
            with ctx.artifact(artifact, meta={"url": url, "chart": name, "version": version}) as sink:
                h = hashlib.sha256()
                for chunk in _charts.download(_charts.chart_url(url, entry), entry.get("digest")):
                    sink.write(chunk)
                    h.update(chunk)
                    size += len(chunk)
            kept.append(
                {
                    "name": name,
                    "version": version,
                    "artifact": artifact,
                    "digest": "sha256:" + h.hexdigest(),
                    "size": size,
                    "metadata": _charts.metadata_of(entry),
                }
            )
    return {"url": url, "key": key, "charts": kept}


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    wants_releases = as_bool(source.get("releases"), bool(source.get("kubeconfig")))
    revisions = backup_releases(ctx, source) if wants_releases else []
    used = {(r["chart"], r["chart_version"]) for r in revisions}
    all_versions = as_bool(source.get("all_versions"), False)
    repos = [backup_repository(ctx, r, used, all_versions) for r in _repositories(source)]
    oci = as_list(source.get("oci_charts"))
    copier = Copier(ctx, ImageSettings.from_mapping({k: source.get(k) for k in ("plain_http", "credentials")}))
    images = []
    for ref in oci:
        try:
            images.append(copier.image(parse(ref.removeprefix("oci://")), ["config"]))
        except DrtoolError as exc:
            raise SourceError(f"OCI chart {ref}: {exc.message}", exc.hint) from None
    copier.copy_blobs()
    index = {"format": FORMAT, "repositories": repos, "oci_charts": [dataclasses.asdict(i) for i in images]}
    with ctx.artifact(INDEX, meta={"format": FORMAT}) as sink:
        sink.write(json.dumps(index, indent=1, sort_keys=True).encode())
    releases: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(revisions, key=lambda r: (r["namespace"] or "", r["name"] or "", r["revision"] or 0)):
        releases.setdefault(f"{r['namespace']}/{r['name']}", []).append(
            {k: r[k] for k in ("revision", "status", "chart", "chart_version", "app_version")}
        )
    return {
        "releases": releases,
        "revisions": len(revisions),
        "repository_charts": sum(len(r["charts"]) for r in repos),
        "oci_charts": [i.ref for i in images],
    }


def discover_inventory(source: Mapping[str, Any]) -> Inventory:
    counts = {"repositories": len(_repositories(source)), "oci_charts": len(as_list(source.get("oci_charts")))}
    if source.get("kubeconfig"):
        client = KubeClient(Connection.from_mapping(source))
        secrets = _secrets(client, as_list(source.get("namespaces")))
        names = {(s["metadata"]["namespace"], s["metadata"]["labels"].get("name")) for s in secrets}
        counts["releases"] = len(names)
    return Inventory(counts=counts)
