"""Read a restored registry back through the target MLflow's API and its object store, compare with the backup.

Checks: every model with its description and tags; every version (matched by number, or by its rewritten
source where the target renumbered it) with source, stage, description and tags; model and version
counts; each alias pointing at the same version; every file re-read from the target store with its
SHA-256 equal to the backup's; and each ``MLmodel`` file parsing as an MLflow model with flavors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool import yamlio
from drtool.errors import SourceError
from drtool.plugin.contract import Check, RestoreContext

from .artifacts import HashingReader, S3Location
from .client import MlflowClient, Obj, tag_map
from .restore import destinations, dry_run, load
from .settings import Target

READ = 1 << 20


def _check(name: str, problems: list[str], ok_detail: str) -> Check:
    if problems:
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return Check(name, False, "; ".join(problems[:5]) + more)
    return Check(name, True, ok_detail)


def _file_sha(location: S3Location, path: str) -> str:
    stream = HashingReader(location.open(path))
    while stream.read(READ):
        pass
    return stream.hexdigest()


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    if dry_run(options):
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    settings = Target.from_mapping(target)
    document = load(ctx)
    if not document["models"]:
        return []  # a backup of no models: nothing to compare (the verdict says "none", not "passed")
    client = MlflowClient(settings.url)
    dest = destinations(document, settings)
    files = {mv["artifact"]: mv["files"] for m in document["models"] for mv in m["versions"]}
    model_problems: list[str] = []
    version_problems: list[str] = []
    alias_problems: list[str] = []
    found_models = found_versions = 0
    for model in document["models"]:
        name = model["name"]
        have = client.model(name)
        if have is None:
            model_problems.append(f"model {name} missing")
            continue
        found_models += 1
        if (have.get("description") or "") != model["description"] or tag_map(have) != model["tags"]:
            model_problems.append(f"model {name}: description or tags differ")
        present = client.versions(name)
        by_number = {v["version"]: v for v in present}
        by_source = {v.get("source"): v for v in present}
        mapping: dict[str, str] = {}
        for mv in model["versions"]:
            want = dest[mv["artifact"]]
            got = by_number.get(mv["version"])
            got = got if got is not None and got.get("source") == want else by_source.get(want)
            if got is None:
                version_problems.append(f"{name} version {mv['version']} missing")
                continue
            found_versions += 1
            mapping[mv["version"]] = got["version"]
            differs = [
                field
                for field, a, b in (
                    ("stage", got.get("current_stage") or "None", mv["stage"]),
                    ("description", got.get("description") or "", mv["description"]),
                    ("tags", tag_map(got), mv["tags"]),
                )
                if a != b
            ]
            if differs:
                version_problems.append(f"{name} version {mv['version']}: {', '.join(differs)} differ")
        aliases = {a["alias"]: str(a["version"]) for a in have.get("aliases") or []}
        wanted = {a: mapping.get(v) for a, v in model["aliases"].items()}
        if {a: aliases.get(a) for a in wanted} != wanted:
            alias_problems.append(f"{name}: aliases {aliases} != {wanted}")
    total_versions = sum(len(m["versions"]) for m in document["models"])
    checks = [
        _check("models", model_problems, f"{found_models} model(s), descriptions and tags equal"),
        Check(
            "model and version counts",
            found_models == len(document["models"]) and found_versions == total_versions,
            f"models {found_models}/{len(document['models'])}, versions {found_versions}/{total_versions}",
        ),
        _check("versions", version_problems, f"{found_versions} version(s): source, stage, description, tags"),
        _check("aliases", alias_problems, f"{sum(len(m['aliases']) for m in document['models'])} alias(es)"),
    ]
    checks += _artifacts(settings, dest, files)
    return checks


def _artifacts(target: Target, dest: Mapping[str, str], files: Mapping[str, list[Obj]]) -> list[Check]:
    s3 = target.s3.client()
    sums: list[str] = []
    models: list[str] = []
    count = loadable = 0
    for artifact, uri in sorted(dest.items()):
        location = S3Location(s3, uri)
        for f in files[artifact]:
            count += 1
            try:
                if _file_sha(location, f["path"]) != f["sha256"]:
                    sums.append(f"{uri}/{f['path']} differs")
            except SourceError as exc:
                sums.append(f"{uri}/{f['path']}: {exc.message}")
                continue
            if f["path"].rsplit("/", 1)[-1] == "MLmodel":
                loadable += 1
                body = yamlio.loads(location.open(f["path"]).read(READ))
                if not isinstance(body, dict) or not body.get("flavors"):
                    models.append(f"{uri}/{f['path']} has no flavors")
    return [
        _check("artifact checksums", sums, f"{count} file(s) re-read from the target store, SHA-256 equal"),
        _check("model files loadable", models, f"{loadable} MLmodel file(s) parse with flavors"),
    ]
