"""Restore a model-registry backup into a (fresh) MLflow server, files re-homed to a target bucket/prefix.

Order, so that nothing is visible in the target registry before the files it points at are in place and
verified (stage, then commit):
1. preflight: both servers answer; no target version that would be reused points elsewhere (refuse first);
2. files: each ``files/<n>.tar`` streamed into ``artifacts/<model>/<version>/<name>`` (each file checked
   against its SHA-256; an equal file already there is skipped, so a re-run uploads nothing);
3. linked runs: experiment by name, then a new run (tagged ``drtool.source_run_id``, so a re-run finds it)
   with the original name, start/end time, status, params, latest metrics and tags;
4. models (description, tags), then versions in ascending order, each waited on until READY, with its
   source rewritten to the new location and its run id mapped; a number the source skipped (a deleted
   version) is kept by creating and deleting a placeholder version;
5. stages, then aliases last (a serving system following ``@champion`` sees a complete model only).
With the ``dry_run`` option nothing is written: the same walk lists what would change.
What MLflow's API cannot reproduce is reported, not faked (``details.not_reproduced``, ``details.id_map``).
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from typing import Any

from drtool.errors import IntegrityError, UsageError
from drtool.plugin.contract import RestoreContext, RestoreResult
from drtool.plugin.toolkit import archive, paths
from drtool.plugin.toolkit.settings import as_bool

from .artifacts import S3Location
from .backup import REGISTRY
from .client import MlflowClient, Obj, require_server, tag_map
from .settings import Target

SOURCE_RUN_TAG = "drtool.source_run_id"
PLACEHOLDER = ".drtool-placeholder"
NOT_REPRODUCED = (
    "creation and update timestamps of models and versions (set by the server)",
    "creators (user_id) of versions and runs",
    "run ids (new runs carry tag drtool.source_run_id; see details.id_map.runs)",
    "metric histories (the latest value of each metric is restored)",
    "deleted versions after a model's last version, and deleted models (the API does not show them)",
    "MLflow 3 logged-model ids (model_id) of versions",
)


def load(ctx: RestoreContext) -> Obj:
    """The backup's registry document, read to its end (so the store has verified it)."""
    with ctx.open(REGISTRY) as src:
        document = json.loads(b"".join(iter(src)))
    if document.get("format") != 1:
        raise IntegrityError(f"{REGISTRY} has unknown format {document.get('format')!r}", "upgrade drtool")
    return document


def _rel(resolved: str) -> str:
    """The last path segment of a version's original location (``model`` for ``.../artifacts/model``)."""
    return resolved.rstrip("/").rsplit("/", 1)[-1] or "files"


def destinations(document: Obj, target: Target) -> dict[str, str]:
    """Backup artifact (``files/<n>.tar``) -> its new home, under the first version that uses it: the restored
    versions' new source (a folder, or the object itself where the source named a single S3 object)."""
    out: dict[str, str] = {}
    for model in document["models"]:
        for mv in model["versions"]:
            out.setdefault(mv["artifact"], target.version_uri(model["name"], mv["version"], _rel(mv["resolved"])))
    return out


class Restorer:
    def __init__(self, ctx: RestoreContext, target: Target, dry_run: bool = False) -> None:
        self.ctx = ctx
        self.dry_run = dry_run
        self.target = target
        self.client = MlflowClient(target.url)
        self.s3 = target.s3.client()
        self.document = load(ctx)
        self.dest = destinations(self.document, target)
        self.files = {mv["artifact"]: _checked(mv["files"]) for m in self.document["models"] for mv in m["versions"]}
        self.changed: list[str] = []
        self.run_map: dict[str, str] = {}
        self.uploaded = 0

    def write(self, what: str, method: str, endpoint: str, body: Obj) -> Obj:
        """One change to the target registry, recorded in ``changed``; a dry run only records it."""
        self.changed.append(what)
        return {} if self.dry_run else self.client.call(method, endpoint, json=body)

    # --- 1. preflight -------------------------------------------------------------------------------

    def preflight(self) -> None:
        require_server(self.client)
        for model in self.document["models"]:
            present = (
                {v["version"]: v for v in self.client.versions(model["name"])}
                if self.client.model(model["name"])
                else {}
            )
            for mv in model["versions"]:
                have = present.get(mv["version"])
                want = self.dest[mv["artifact"]]
                if have is not None and have.get("source") != want:
                    raise UsageError(
                        f"target model {model['name']} version {mv['version']} exists with another source "
                        f"({have.get('source')})",
                        "restore into a fresh MLflow server, or delete that model in the target first",
                    )

    # --- 2. files -----------------------------------------------------------------------------------

    def files_in(self, artifact: str) -> None:
        location = S3Location(self.s3, self.dest[artifact])
        if self.dry_run:
            missing = [f for f in self.files[artifact] if not location.holds(f["path"], f["sha256"], f["size"])]
            self.changed += [f"file {location.key(f['path'])}" for f in missing]
            self.uploaded += sum(f["size"] for f in missing)
            return
        wanted = {f["path"] or "file": f for f in self.files[artifact]}
        with self.ctx.open(artifact) as src, tarfile.open(fileobj=src, mode="r|") as tar:  # type: ignore[call-overload]
            for member in archive.members(tar, f"model-registry: {artifact}"):
                listed = wanted.get(member.name)
                if listed is None or not member.isfile():
                    raise IntegrityError(f"{artifact} holds {member.name!r}, which {REGISTRY} does not list")
                if location.holds(listed["path"], listed["sha256"], listed["size"]):
                    continue
                stream = tar.extractfile(member)
                assert stream is not None
                location.put(listed["path"], stream, listed["sha256"], listed["size"])
                self.uploaded += listed["size"]
                self.changed.append(f"file {location.key(listed['path'])}")

    # --- 3. runs ------------------------------------------------------------------------------------

    def experiment_id(self, name: str) -> str:
        found = self.client.experiment_by_name(name)
        if found:
            return str(found["experiment_id"])
        created = self.write(f"experiment {name}", "POST", "experiments/create", {"name": name})
        return str(created.get("experiment_id") or "")

    def run(self, old_id: str, run: Obj) -> str:
        """The target run standing for source run ``old_id``: found by its tag, else created; completed either way
        (a run whose creation was interrupted before its data was logged gets the rest on the next restore)."""
        exp = self.experiment_id(run["experiment"])
        found = []
        if exp:
            search = {"experiment_ids": [exp], "filter": f"tags.`{SOURCE_RUN_TAG}` = '{old_id}'", "max_results": 1}
            found = self.client.post("runs/search", search).get("runs") or []
        if found:
            have = found[0]
        else:
            tags = {k: v for k, v in run["tags"].items() if k != SOURCE_RUN_TAG} | {SOURCE_RUN_TAG: old_id}
            body = {
                "experiment_id": exp,
                "run_name": run["run_name"],
                "start_time": run["start_time"],
                "tags": _tags(tags),
            }
            created = self.write(f"run for {old_id}", "POST", "runs/create", body)
            if self.dry_run:
                return ""
            have = created["run"]
        new_id = str(have["info"]["run_id"])
        data = have.get("data") or {}
        have_params = tag_map({"tags": data.get("params")})
        params = [{"key": k, "value": v} for k, v in run["params"].items() if k not in have_params]
        logged = {m["key"] for m in data.get("metrics") or []}
        metrics = [m for m in run["metrics"] if m["key"] not in logged]
        if params or metrics:
            batch = {"run_id": new_id, "params": params, "metrics": metrics}
            self.write(f"run {new_id} params and metrics", "POST", "runs/log-batch", batch)
        if have["info"].get("status") != run["status"] or have["info"].get("end_time") != run.get("end_time"):
            update = {"run_id": new_id, "status": run["status"]}
            if run.get("end_time"):
                update["end_time"] = run["end_time"]
            self.write(f"run {new_id} status", "POST", "runs/update", update)
        return new_id

    # --- 4. models and versions ---------------------------------------------------------------------

    def model(self, model: Obj) -> None:
        name = model["name"]
        have = self.client.model(name)
        if have is None:
            body = {"name": name, "description": model["description"], "tags": _tags(model["tags"])}
            self.write(f"model {name}", "POST", "registered-models/create", body)
            return
        if (have.get("description") or "") != model["description"]:
            body = {"name": name, "description": model["description"]}
            self.write(f"model {name} description", "PATCH", "registered-models/update", body)
        for key, value in model["tags"].items():
            if tag_map(have).get(key) != value:
                body = {"name": name, "key": key, "value": value}
                self.write(f"model {name} tag {key}", "POST", "registered-models/set-tag", body)

    def versions(self, model: Obj) -> dict[str, str]:
        """Create the missing versions in ascending order; returns backup version -> target version."""
        name = model["name"]
        present = {v["version"]: v for v in self.client.versions(name)} if self.client.model(name) else {}
        last = max((int(v) for v in present), default=0)
        mapping: dict[str, str] = {}
        for mv in sorted(model["versions"], key=lambda v: int(v["version"])):
            number = int(mv["version"])
            if mv["version"] in present:
                mapping[mv["version"]] = mv["version"]
                self.update_version(name, mv, present[mv["version"]])
                continue
            while last + 1 < number:  # the source's deleted version: keep the numbering with a placeholder
                body = {"name": name, "source": f"{self.target.artifacts}/{PLACEHOLDER}"}
                placeholder = self.write(f"model {name} placeholder", "POST", "model-versions/create", body)
                if self.dry_run:
                    break
                version = placeholder["model_version"]["version"]
                self.client.call("DELETE", "model-versions/delete", json={"name": name, "version": version})
                last = int(version)
            body: Obj = {
                "name": name,
                "source": self.dest[mv["artifact"]],
                "description": mv["description"],
                "tags": _tags(mv["tags"]),
            }
            if mv["run_link"]:
                body["run_link"] = mv["run_link"]
            if self.run_map.get(mv["run_id"]):
                body["run_id"] = self.run_map[mv["run_id"]]
            created = self.write(f"model {name} version {mv['version']}", "POST", "model-versions/create", body)
            if self.dry_run:
                mapping[mv["version"]] = mv["version"]
                last = number
                continue
            ready = self.client.wait_ready(name, created["model_version"]["version"])
            last = int(ready["version"])
            mapping[mv["version"]] = str(ready["version"])
        return mapping

    def update_version(self, name: str, mv: Obj, have: Obj) -> None:
        version = have["version"]
        if (have.get("description") or "") != mv["description"]:
            body = {"name": name, "version": version, "description": mv["description"]}
            self.write(f"model {name} version {version} description", "PATCH", "model-versions/update", body)
        for key, value in mv["tags"].items():
            if tag_map(have).get(key) != value:
                body = {"name": name, "version": version, "key": key, "value": value}
                self.write(f"model {name} version {version} tag {key}", "POST", "model-versions/set-tag", body)

    # --- 5. stages, aliases -------------------------------------------------------------------------

    def stages(self, model: Obj, mapping: Mapping[str, str]) -> None:
        name = model["name"]
        for mv in model["versions"]:
            version = mapping[mv["version"]]
            have = self.client.version(name, version) or {}
            if (have.get("current_stage") or "None") != mv["stage"]:
                body = {"name": name, "version": version, "stage": mv["stage"], "archive_existing_versions": False}
                what = f"model {name} version {version} stage {mv['stage']}"
                self.write(what, "POST", "model-versions/transition-stage", body)

    def aliases(self, model: Obj, mapping: Mapping[str, str]) -> None:
        name = model["name"]
        have = {a["alias"]: str(a["version"]) for a in (self.client.model(name) or {}).get("aliases") or []}
        for alias, version in sorted(model["aliases"].items()):
            new = mapping.get(version)
            if new is None:
                continue  # the alias named a version that was not backed up (not READY): reported by backup
            if have.get(alias) != new:
                body = {"name": name, "alias": alias, "version": new}
                self.write(f"model {name} alias {alias} -> {new}", "POST", "registered-models/alias", body)

    def run_all(self) -> RestoreResult:
        self.preflight()
        for artifact in sorted(self.dest):
            self.files_in(artifact)
        for old_id, run in sorted(self.document["runs"].items()):
            if run:
                self.run_map[old_id] = self.run(old_id, run)
        mappings: dict[str, dict[str, str]] = {}
        for model in self.document["models"]:
            self.model(model)
            mappings[model["name"]] = self.versions(model)
        for model in self.document["models"]:
            self.stages(model, mappings[model["name"]])
        for model in self.document["models"]:
            self.aliases(model, mappings[model["name"]])
        renumbered = {m: {o: n for o, n in vs.items() if o != n} for m, vs in mappings.items()}
        models = len(self.document["models"])
        versions = sum(len(v) for v in mappings.values())
        details = {
            "models": models,
            "versions": versions,
            "bytes_uploaded": self.uploaded,
            "id_map": {"versions": {m: v for m, v in renumbered.items() if v}, "runs": self.run_map},
            "not_reproduced": list(NOT_REPRODUCED),
            "changes": self.changed[:200],
        }
        if self.dry_run:
            summary = (
                f"dry run against {self.client.url}: {len(self.changed)} change(s), {self.uploaded} bytes to upload"
            )
            return RestoreResult(changed=False, summary=summary, details=details | {"would_change": details["changes"]})
        summary = (
            f"{models} model(s), {versions} version(s), {len(self.run_map)} run(s) in {self.client.url}; "
            f"{len(self.changed)} change(s), {self.uploaded} bytes uploaded"
        )
        return RestoreResult(changed=bool(self.changed), summary=summary, details=details)


def _checked(files: list[Obj]) -> list[Obj]:
    """A version's file list with every path a plain relative key (``""``: the source was one object)."""
    for f in files:
        if f["path"]:
            paths.relative(f["path"], "model-registry: file")
    return files


def _tags(tags: Mapping[str, str]) -> list[Obj]:
    return [{"key": k, "value": v} for k, v in sorted(tags.items())]


def dry_run(options: Mapping[str, Any]) -> bool:
    """The ``dry_run`` option (``drtool restore --dry-run``): report what would change, write nothing."""
    return as_bool(options.get("dry_run"))


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    return Restorer(ctx, Target.from_mapping(target), dry_run(options)).run_all()
