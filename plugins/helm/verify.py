"""Read a Helm restore back: every chart from the target registry, every release revision from the cluster.

What the restore wrote is verified exactly: each revision's record (the decoded release) and the labels Helm
finds it by. What Helm itself does afterwards is listed, not failed, because a restored release is meant to
be upgraded: ``helm upgrade`` (by a person, or by a GitOps controller running Helm) writes a newer revision
and rewrites the one it replaces to ``superseded`` (its ``status`` label and its record's ``info.status``);
a Secret driver label another tool adds is listed too. The manager that wrote the newer revision is named
from its managedFields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.fields import managers
from drtool.kube.settings import Connection
from drtool.plugin.contract import Check, RestoreContext
from drtool.plugin.toolkit.oci.push import check_images, image_from_dict
from drtool.plugin.toolkit.oci.settings import TargetSettings

from . import charts as _charts
from .release import decode, summary
from .restore import DEFAULT_PREFIX, chart_registry, chart_repository, load_index, load_releases

SUPERSEDED = "superseded"
MAX_LISTED = 3
Obj = dict[str, Any]


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    settings = TargetSettings.parse(target, options)
    if settings.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    prefix = str({**target, **options}.get("chart_prefix", DEFAULT_PREFIX))
    index = load_index(ctx)
    checks = [
        _check_chart(settings, repo["url"], chart, prefix) for repo in index["repositories"] for chart in repo["charts"]
    ]
    checks += check_images(ctx, settings, [image_from_dict(raw) for raw in index["oci_charts"]], "helm chart")
    secrets = load_releases(ctx)
    if secrets:
        checks.append(check_releases(KubeClient(Connection.from_mapping(target)), secrets))
    return checks


def _check_chart(settings: TargetSettings, repo_url: str, chart: dict[str, Any], prefix: str) -> Check:
    name = f"helm chart: {chart['name']} {chart['version']}"
    try:
        reg = chart_registry(settings, repo_url)
        repository = chart_repository(prefix, chart["name"])
        data, _, _ = reg.manifest(repository, _charts.oci_tag(chart["version"]))
        layer = json.loads(data)["layers"][0]["digest"]
    except DrtoolError as exc:
        return Check(name, False, exc.one_line())
    ok = layer == chart["digest"] and reg.has_blob(repository, layer)
    return Check(name, ok, f"{reg.host}/{repository}:{_charts.oci_tag(chart['version'])} layer {layer}")


def check_releases(client: KubeClient, secrets: list[Obj]) -> Check:
    """Every revision read back through the API and decoded: the same release, the same labels, except where
    a newer revision in the target superseded it."""
    bad: list[str] = []
    moved_on: list[str] = []
    extra_labels: set[str] = set()
    newest = _newest_revisions(secrets)
    for secret in secrets:
        meta = secret["metadata"]
        where = f"{meta['namespace']}/{meta['name']}"
        try:
            live = client.get(f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}")
        except ApiError as exc:
            bad.append(f"{where}: {exc.status} {exc.reason}")
            continue
        superseded = _superseded(live, secret)
        if superseded:
            moved_on.append(where)
        want, have = decode(secret), decode(live)
        if superseded:
            want, have = _without_status(want), _without_status(have)
        labels = (live.get("metadata") or {}).get("labels") or {}
        wrong = [k for k, v in meta["labels"].items() if labels.get(k) != v and not (superseded and k == "status")]
        extra_labels.update(k for k in labels if k not in meta["labels"])
        if want != have or wrong:
            bad.append(f"{where}: " + ("its release record differs" if want != have else f"labels {wrong} differ"))
    releases = {(s["namespace"], s["name"]) for s in (summary(decode(x)) for x in secrets)}
    lines = [f"{len(secrets)} revisions of {len(releases)} releases"]
    lines += [f"differs: {b}" for b in bad[:MAX_LISTED]]
    later = _later_revisions(client, newest)
    if later:
        lines.append("upgraded in the target since the restore (not compared): " + "; ".join(later[:MAX_LISTED]))
    if moved_on:
        lines.append(f"superseded by those upgrades (status only): {', '.join(moved_on[:MAX_LISTED])}")
    if extra_labels:
        lines.append(f"labels added in the target (not compared): {', '.join(sorted(extra_labels))}")
    return Check("helm: release Secrets", not bad, "\n".join(lines))


def _superseded(live: Obj, secret: Obj) -> bool:
    """Helm rewrote a restored revision as superseded: a newer revision replaced it in the target."""
    was = secret["metadata"]["labels"].get("status")
    return was != SUPERSEDED and ((live.get("metadata") or {}).get("labels") or {}).get("status") == SUPERSEDED


def _without_status(release: Obj) -> Obj:
    return {**release, "info": {k: v for k, v in (release.get("info") or {}).items() if k != "status"}}


def _newest_revisions(secrets: list[Obj]) -> dict[tuple[str, str], int]:
    """(namespace, release) -> the newest revision the backup holds."""
    out: dict[tuple[str, str], int] = {}
    for secret in secrets:
        labels = secret["metadata"]["labels"]
        key = (secret["metadata"]["namespace"], labels["name"])
        out[key] = max(out.get(key, 0), int(labels["version"]))
    return out


def _later_revisions(client: KubeClient, newest: Mapping[tuple[str, str], int]) -> list[str]:
    """Revisions in the target newer than the backup's newest, each with the manager that wrote it."""
    out = []
    for (namespace, name), revision in sorted(newest.items()):
        path = f"/api/v1/namespaces/{namespace}/secrets"
        for page in client.list_pages(path, {"labelSelector": f"owner=helm,name={name}"}):
            for item in page.get("items") or []:
                labels = item["metadata"].get("labels") or {}
                if labels.get("version", "").isdigit() and int(labels["version"]) > revision:
                    writers = sorted({m.name for m in managers(item)}) or ["(no manager)"]
                    status = labels.get("status", "?")
                    out.append(f"{namespace}/{name} revision {labels['version']} {status} by {', '.join(writers)}")
    return out
