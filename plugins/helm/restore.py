"""Restore Helm: charts into a target OCI registry, then release Secrets (with their labels) into a cluster.

Charts first, so that a release restored into the new cluster can be upgraded or rolled back from a registry
that exists. Release Secrets are read completely from the store (the whole artifact's hash is checked) before
the first one is written; they are small (Helm keeps ten revisions by default) and held in memory meanwhile.
Each Secret is written with server-side apply (field manager ``drtool``); one that already holds the backup's
labels and data is left alone, so a rerun changes nothing. Missing namespaces are created.

Target settings: ``kubeconfig``/``context`` (releases; without them only charts are restored), ``registry`` /
``registry_map`` / ``plain_http`` (charts, as the images plugin takes them), ``chart_prefix`` (``charts``):
the repository path classic-repository charts are pushed under (``<registry>/<prefix>/<name>:<version>``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from drtool.errors import DrtoolError, SourceError
from drtool.kube.client import APPLY_PATCH, FIELD_MANAGER, ApiError, KubeClient
from drtool.kube.kubeconfig import load_configuration
from drtool.kube.settings import Connection
from drtool.plugin.contract import Dependency, RestoreContext, RestoreResult
from drtool.plugin.toolkit import paths
from drtool.plugin.toolkit.oci.push import image_from_dict, push_all
from drtool.plugin.toolkit.oci.registry import Registry, valid_name, valid_reference
from drtool.plugin.toolkit.oci.settings import TargetSettings, registry_for

from . import charts as _charts
from .backup import INDEX, RELEASES

DEFAULT_PREFIX = "charts"


def load_index(ctx: RestoreContext) -> dict[str, Any]:
    with ctx.open(INDEX) as src:
        return json.loads(src.read())


def load_releases(ctx: RestoreContext) -> list[dict[str, Any]]:
    if not any(a.name == RELEASES for a in ctx.artifacts):
        return []
    with ctx.open(RELEASES) as src:
        secrets = [json.loads(line) for line in src.read().splitlines() if line.strip()]
    for secret in secrets:  # both go into the API path each Secret is written at
        paths.segment(secret["metadata"]["namespace"], "helm: release namespace")
        paths.segment(secret["metadata"]["name"], "helm: release Secret")
    return secrets


def _stream(ctx: RestoreContext, name: str) -> Iterator[bytes]:
    with ctx.open(name) as src:
        yield from src


def chart_registry(settings: TargetSettings, repo_url: str) -> Registry:
    """Classic-repository charts go to ``registry`` (or the mapping of the repository's host)."""
    return registry_for(settings, settings.host_for(urlsplit(repo_url).netloc))


def chart_repository(prefix: str, name: str) -> str:
    return f"{prefix.strip('/')}/{name}" if prefix.strip("/") else name


def restore_charts(ctx: RestoreContext, settings: TargetSettings, index: dict[str, Any], prefix: str) -> int:
    """Push classic-repository charts as OCI charts, then the OCI charts by digest; returns how many changed."""
    for repo in index["repositories"]:  # chart names and versions come from the backup: checked before any push
        for chart in repo["charts"]:
            valid_name(chart_repository(prefix, chart["name"]))
            valid_reference(_charts.oci_tag(str(chart["metadata"].get("version", "latest"))))
    changed = 0
    for repo in index["repositories"]:
        reg = chart_registry(settings, repo["url"])
        for chart in repo["charts"]:
            chunks = _stream(ctx, chart["artifact"])
            target = chart_repository(prefix, chart["name"])
            meta, digest, size = chart["metadata"], chart["digest"], chart["size"]
            _, wrote = _charts.push_chart(reg, target, meta, digest, size, chunks, settings.dry_run)
            changed += wrote
    images = [image_from_dict(raw) for raw in index["oci_charts"]]
    if images:
        changed += push_all(ctx, settings, images).counts.changed()
    return changed


def _ensure_namespace(client: KubeClient, namespace: str) -> bool:
    try:
        client.get(f"/api/v1/namespaces/{namespace}")
        return False
    except ApiError as exc:
        if exc.status != 404:
            raise
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    client.request("POST", "/api/v1/namespaces", body=json.dumps(body).encode(), ok=(201, 409))
    return True


def same_record(live: dict[str, Any], secret: dict[str, Any]) -> bool:
    labels = (live.get("metadata") or {}).get("labels") or {}
    return live.get("data") == secret["data"] and labels == secret["metadata"]["labels"]


def restore_releases(client: KubeClient, secrets: list[dict[str, Any]], dry_run: bool = False) -> tuple[int, int]:
    """(written, unchanged) release Secrets; with ``dry_run`` (would be written, unchanged), nothing written."""
    written = unchanged = 0
    for ns in sorted({s["metadata"]["namespace"] for s in secrets}):
        if not dry_run:
            _ensure_namespace(client, ns)
    for secret in secrets:
        meta = secret["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}"
        try:
            if same_record(client.get(path), secret):
                unchanged += 1
                continue
        except ApiError as exc:
            if exc.status != 404:
                raise
        written += 1
        if dry_run:
            continue
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        client.request("PATCH", path, params=params, body=json.dumps(secret).encode(), content_type=APPLY_PATCH)
    return written, unchanged


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    settings = TargetSettings.parse(target, options)
    prefix = str({**target, **options}.get("chart_prefix", DEFAULT_PREFIX))
    index = load_index(ctx)
    secrets = load_releases(ctx)  # read and verified whole before anything is written
    charts_changed = restore_charts(ctx, settings, index, prefix)
    written = unchanged = 0
    server = None
    if secrets:
        if not target.get("kubeconfig") and not target.get("context"):
            raise SourceError(
                f"the backup holds {len(secrets)} Helm release Secrets but the target names no cluster",
                "set kubeconfig=PATH in the restore target (charts were restored)",
            )
        client = KubeClient(Connection.from_mapping(target))
        server = client.server
        written, unchanged = restore_releases(client, secrets, settings.dry_run)
    summary_line = (
        f"{len(secrets)} release revisions into {server or '(no cluster)'}: {written} written, {unchanged} unchanged; "
        f"{charts_changed} charts pushed"
    )
    details = {"written": written, "unchanged": unchanged, "charts_changed": charts_changed, "server": server}
    if settings.dry_run:
        return RestoreResult(changed=False, summary=f"dry run, would write: {summary_line}", details=details)
    return RestoreResult(changed=bool(written or charts_changed), summary=summary_line, details=details)


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    settings = TargetSettings.parse(target, {})
    index = load_index(ctx)
    deps = []
    hosts = {settings.registry_map.get(i["host"]) or settings.registry for i in index["oci_charts"]}
    if index["repositories"]:
        hosts.add(settings.registry)
    for host in sorted(h or "(no registry set)" for h in hosts):
        deps.append(Dependency("endpoint", host, "registry Helm charts are pushed to", "charts.json"))
    if any(a.name == RELEASES for a in ctx.artifacts):
        try:
            server = load_configuration(Connection.from_mapping(target)).host
        except DrtoolError as exc:
            server = f"(unresolved: {exc.message})"
        deps.append(Dependency("endpoint", server, "Kubernetes API the release Secrets are written to", "kubeconfig"))
    return deps
