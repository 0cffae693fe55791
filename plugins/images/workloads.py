"""Image references found in a cluster's workloads, listed through the toolkit's Kubernetes client.

A plugin only sees its own artifacts, so the images plugin lists the workloads itself at backup time rather
than reading the kubernetes plugin's backup. Only types that carry pod templates are listed (built-ins and
the AI platform's custom resources below, in any group, whatever version the server stores), not every type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.discovery import crd_index, discover
from drtool.kube.references import image_references
from drtool.kube.settings import Connection

# resource names (any group) whose objects carry pod templates or container images
WORKLOAD_RESOURCES = frozenset(
    {
        "pods",
        "podtemplates",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "replicationcontrollers",
        "jobs",
        "cronjobs",
        "jobsets",
        "leaderworkersets",
        "trainjobs",
        "trainingruntimes",
        "clustertrainingruntimes",
        "pytorchjobs",
        "mpijobs",
        "inferenceservices",
        "servingruntimes",
        "clusterservingruntimes",
        "inferencegraphs",
        "rayclusters",
        "rayjobs",
        "rayservices",
        "notebooks",
    }
)


def scan(settings: Mapping[str, Any]) -> tuple[str, dict[str, list[str]]]:
    """(API server, image reference -> up to three objects using it) from every workload type served."""
    client = KubeClient(Connection.from_mapping(settings))
    found: dict[str, list[str]] = {}
    types, _stale = discover(client, crd_index(client))
    for t in types:
        if t.resource not in WORKLOAD_RESOURCES or "list" not in t.verbs:
            continue
        try:
            for page in client.list_pages(t.path()):
                for obj in page.get("items") or []:
                    meta = obj.get("metadata") or {}
                    where = f"{t.key} {meta.get('namespace', '')}/{meta.get('name', '')}".replace(" /", " ")
                    for image in image_references(obj):
                        users = found.setdefault(image, [])
                        if len(users) < 3:
                            users.append(where)
        except ApiError as exc:
            raise SourceError(f"listing {t.key} for image references: {exc.message}", exc.hint) from None
    return client.server, found
