"""Helm content built here, without the internet or the Helm CLI: packaged charts, a classic repository
folder (``index.yaml`` + ``.tgz``), a chart pushed to an OCI registry as ``helm push`` lays it out, and
release Secrets with several revisions written into a cluster as Helm's Secret driver writes them.

Used by the lab (``HelmLab.seed``) and the tests; ``helm list``/``helm history`` read these releases.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Any

import yaml

from drtool.kube.client import KubeClient
from drtool.plugin.toolkit.oci.registry import Registry

from .charts import push_chart
from .release import SECRET_TYPE, encode, labels, secret_name
from .restore import restore_releases

TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
"""


def package(name: str, version: str, app_version: str = "1.0") -> tuple[bytes, dict[str, Any]]:
    """(``.tgz``, Chart.yaml) of a small chart, reproducible (fixed mtimes)."""
    meta = {"apiVersion": "v2", "name": name, "version": version, "appVersion": app_version, "type": "application"}
    files = {
        f"{name}/Chart.yaml": yaml.safe_dump(meta).encode(),
        f"{name}/values.yaml": b"greeting: hello\nreplicas: 1\n",
        f"{name}/templates/configmap.yaml": TEMPLATE.encode(),
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue(), meta


def write_repository(folder: Path, charts: list[tuple[str, str]]) -> dict[str, Any]:
    """A classic chart repository in ``folder``: each (name, version) packaged, and its ``index.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    entries: dict[str, list[dict[str, Any]]] = {}
    for name, version in charts:
        tgz, meta = package(name, version)
        filename = f"{name}-{version}.tgz"
        (folder / filename).write_bytes(tgz)
        digest = hashlib.sha256(tgz).hexdigest()
        entry = meta | {"urls": [filename], "digest": digest, "created": "2026-11-01T00:00:00Z"}
        entries.setdefault(name, []).insert(0, entry)  # newest first, as `helm repo index` writes
    index = {"apiVersion": "v1", "entries": entries, "generated": "2026-11-01T00:00:00Z"}
    (folder / "index.yaml").write_text(yaml.safe_dump(index))
    return index


def push_oci_chart(reg: Registry, repository: str, name: str, version: str) -> str:
    """A chart in Helm's OCI layout at ``<repository>:<version>``; returns the manifest digest."""
    tgz, meta = package(name, version)
    digest = "sha256:" + hashlib.sha256(tgz).hexdigest()
    return push_chart(reg, repository, meta, digest, len(tgz), iter([tgz]))[0]


def release(name: str, namespace: str, revision: int, chart: str, version: str, status: str) -> dict[str, Any]:
    """A Helm 3 ``release.Release`` as JSON, as ``helm install``/``upgrade`` would store it."""
    _, meta = package(chart, version)
    when = f"2026-11-{revision:02d}T10:00:00Z"
    return {
        "name": name,
        "namespace": namespace,
        "version": revision,
        "info": {
            "first_deployed": "2026-11-01T10:00:00Z",
            "last_deployed": when,
            "deleted": "",
            "description": "Install complete" if revision == 1 else "Upgrade complete",
            "status": status,
        },
        "chart": {
            "metadata": meta,
            "lock": None,
            "templates": [{"name": "templates/configmap.yaml", "data": _b64(TEMPLATE.encode())}],
            "values": {"greeting": "hello", "replicas": 1},
            "schema": None,
            "files": [],
        },
        "config": {"greeting": f"revision {revision}", "db": {"password": "s3cret-lab-only"}},
        "manifest": f"---\n# Source: {chart}/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\n",
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def release_secret(rel: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(rel["name"], rel["version"]),
            "namespace": rel["namespace"],
            "labels": labels(rel),
        },
        "type": SECRET_TYPE,
        "data": {"release": encode(rel)},
    }


def seed_releases(client: KubeClient, chart: str = "webapp", namespace: str = "apps") -> list[dict[str, Any]]:
    """Release ``web`` with three revisions (two superseded, one deployed) and ``jobs`` with one."""
    rels = [
        release("web", namespace, 1, chart, "0.1.0", "superseded"),
        release("web", namespace, 2, chart, "0.2.0", "superseded"),
        release("web", namespace, 3, chart, "0.2.0", "deployed"),
        release("jobs", "batch", 1, "batchjobs", "1.0.0", "deployed"),
    ]
    restore_releases(client, [release_secret(r) for r in rels])
    return rels
