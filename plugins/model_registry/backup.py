"""Back up an MLflow model registry: every model and version, their linked runs, and the versions' files.

Artifacts of a backup:
- ``files/<n>.tar``: the files of one artifact location (a version's resolved source), streamed from the
  source into a tar stream as they are read, each file's SHA-256 taken on the way. Versions that share a
  location share the artifact.
- ``registry.json``: written last, the metadata: models (description, tags, aliases), versions (source,
  run linkage, tags, stage, status, description, which ``files/<n>.tar`` holds their files, and each
  file's size and SHA-256), and the linked runs (experiment, name, params, latest metrics, tags). It is
  metadata only, so it is built in memory: thousands of versions are a few MB.
Versions that are not READY (PENDING_REGISTRATION, FAILED_REGISTRATION) are skipped and reported.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from typing import Any

from drtool.errors import SourceError
from drtool.plugin.contract import BackupContext, Inventory

from .artifacts import HashingReader, Location, open_location
from .client import MlflowClient, Obj, require_server, tag_map
from .settings import Source

REGISTRY = "registry.json"
FORMAT = 1


def selected_models(client: MlflowClient, source: Source) -> list[Obj]:
    models = list(client.models())
    if source.models:
        missing = set(source.models) - {m["name"] for m in models}
        if missing:
            raise SourceError(f"registered model(s) {', '.join(sorted(missing))} not found at {client.url}")
        models = [m for m in models if m["name"] in source.models]
    return sorted(models, key=lambda m: m["name"])


def discover(source: Mapping[str, Any]) -> Inventory:
    settings = Source.from_mapping(source)
    client = MlflowClient(settings.url)
    require_server(client)
    models = selected_models(client, settings)
    versions = sum(len(client.versions(m["name"])) for m in models)
    return Inventory(
        counts={"registered_models": len(models), "model_versions": versions}, details={"url": settings.url}
    )


def _tar_location(ctx: BackupContext, name: str, location: Location) -> list[dict[str, Any]]:
    """Stream every file of ``location`` into artifact ``name`` (a tar); return [{path, size, sha256}]."""
    entries = sorted(location.files(), key=lambda e: e.path)
    listed: list[dict[str, Any]] = []
    with (
        ctx.artifact(name, meta={"uri": location.uri, "files": len(entries)}) as sink,
        tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar,  # type: ignore[call-overload]
    ):
        for entry in entries:
            info = tarfile.TarInfo(entry.path or "file")
            info.size = entry.size
            stream = HashingReader(location.open(entry.path))
            try:
                tar.addfile(info, stream)
            except OSError as exc:  # fewer bytes than listed: the file changed under the backup
                raise SourceError(f"{location.uri}/{entry.path} changed while it was read: {exc}") from None
            listed.append({"path": entry.path, "size": entry.size, "sha256": stream.hexdigest()})
    return listed


def _run(client: MlflowClient, run_id: str, experiments: dict[str, str]) -> Obj | None:
    """What a restore needs to recreate a version's run: experiment name, name, times, params, metrics, tags."""
    run = client.run(run_id)
    if run is None:
        return None
    info, data = run["info"], run.get("data") or {}
    exp_id = info["experiment_id"]
    if exp_id not in experiments:
        experiments[exp_id] = (client.experiment(exp_id) or {}).get("name") or f"experiment-{exp_id}"
    return {
        "experiment": experiments[exp_id],
        "run_name": info.get("run_name") or "",
        "status": info.get("status") or "FINISHED",
        "start_time": int(info.get("start_time") or 0),
        "end_time": int(info["end_time"]) if info.get("end_time") else None,
        "artifact_uri": info.get("artifact_uri") or "",
        "params": {p["key"]: p.get("value", "") for p in data.get("params") or []},
        "metrics": [
            {k: m[k] for k in ("key", "value", "timestamp", "step") if k in m} for m in data.get("metrics") or []
        ],
        "tags": tag_map(data),
    }


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    settings = Source.from_mapping(source)
    client = MlflowClient(settings.url)
    require_server(client)
    models_out: list[Obj] = []
    runs: dict[str, Obj | None] = {}
    experiments: dict[str, str] = {}
    tarred: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # resolved uri -> (artifact, files)
    skipped: list[str] = []
    for model in selected_models(client, settings):
        name = model["name"]
        versions_out: list[Obj] = []
        for mv in client.versions(name):
            if mv.get("status", "READY") != "READY":
                skipped.append(f"{name} version {mv['version']}: {mv.get('status')}")
                continue
            uri = client.get("model-versions/get-download-uri", name=name, version=mv["version"])["artifact_uri"]
            if uri not in tarred:
                artifact = f"files/{len(tarred)}.tar"
                tarred[uri] = (artifact, _tar_location(ctx, artifact, open_location(client, uri, settings.s3)))
            artifact, files = tarred[uri]
            run_id = mv.get("run_id") or ""
            if settings.runs and run_id and run_id not in runs:
                runs[run_id] = _run(client, run_id, experiments)
            versions_out.append(
                {
                    "version": str(mv["version"]),
                    "source": mv.get("source") or "",
                    "resolved": uri,
                    "artifact": artifact,
                    "files": files,
                    "run_id": run_id,
                    "run_link": mv.get("run_link") or "",
                    "model_id": mv.get("model_id") or "",
                    "stage": mv.get("current_stage") or "None",
                    "description": mv.get("description") or "",
                    "tags": tag_map(mv),
                    "user_id": mv.get("user_id") or "",
                    "creation_timestamp": mv.get("creation_timestamp"),
                }
            )
        models_out.append(
            {
                "name": name,
                "description": model.get("description") or "",
                "tags": tag_map(model),
                "aliases": {a["alias"]: str(a["version"]) for a in model.get("aliases") or []},
                "creation_timestamp": model.get("creation_timestamp"),
                "versions": versions_out,
            }
        )
    document = {"format": FORMAT, "server": client.url, "models": models_out, "runs": runs, "skipped": skipped}
    with ctx.artifact(REGISTRY, meta={"format": FORMAT}) as sink:
        sink.write(json.dumps(document, sort_keys=True).encode())
    return {
        "server": client.url,
        "registered_models": len(models_out),
        "model_versions": sum(len(m["versions"]) for m in models_out),
        "runs": sum(1 for r in runs.values() if r),
        "artifact_locations": len(tarred),
        "files": sum(len(f) for _a, f in tarred.values()),
        "bytes": sum(f["size"] for _a, files in tarred.values() for f in files),
        "skipped": skipped,
    }
