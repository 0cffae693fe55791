"""The model-registry plugin against real MLflow servers (``mlflow server``, SQLite, artifacts in real MinIO).

The seeded source (``mlflow_source``, see drtool_lab.plugins.model_registry) holds ``fraud-detector``
versions 1, 3, 4 (2 deleted) with stages, aliases ``champion`` -> 3 and ``challenger`` -> 4, tags and runs,
and ``tokenizer`` with one proxied and one ``s3://`` version. Restores are read back with MLflow's own
client (the ``mlflow`` package) and the restored model is loaded with ``mlflow.pyfunc``, so a bug in the
plugin's REST code cannot hide in both the write and the check. Tests after the round trip build on its
target, in file order: a second restore, a refused conflicting restore, then a tampered file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_plugins.model_registry import ModelRegistryPlugin

from drtool.errors import SourceError, UsageError
from drtool.plugin.contract import verification
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import RestoreOutcome, restore_dependencies, run_restore
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.mlflow import MlflowLab, start_mlflow_lab

plugin = ModelRegistryPlugin()


@pytest.fixture(scope="module")
def module_repo(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    from drtool.backends.local import LocalBackend

    return Repository.init(LocalBackend(tmp_path_factory.mktemp("mr") / "store"), passphrase=PASSPHRASE)


@contextlib.contextmanager
def with_env(env: dict[str, str]) -> Iterator[None]:
    """Environment variables for one block (MLflow's own client reads S3 keys and its server from them)."""
    patch = pytest.MonkeyPatch()
    for key, value in env.items():
        patch.setenv(key, value)
    try:
        yield
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def seeded_backup(module_repo: Repository, mlflow_source: MlflowLab) -> Manifest:
    with BackupSession(module_repo) as session:
        outcome = session.run_plugin(plugin, mlflow_source.settings)
        assert outcome.status == "ok", outcome.error
        return session.commit()


@pytest.fixture(scope="module")
def restored(
    module_repo: Repository, seeded_backup: Manifest, lab_root: Path
) -> Iterator[tuple[MlflowLab, RestoreOutcome]]:
    target = start_mlflow_lab(lab_root, "mlflow-roundtrip", seed=False)
    try:
        outcome = run_restore(module_repo, seeded_backup, plugin, target.settings)
        yield target, outcome
    finally:
        target.lab.down()


def registry_view(lab: MlflowLab) -> dict[str, Any]:
    """Models, versions, stages, tags, aliases and linked run params, read with MLflow's own client."""
    client = lab.client()
    out: dict[str, Any] = {}
    for model in client.search_registered_models():
        versions = {}
        for mv in client.search_model_versions(f"name='{model.name}'"):
            run = client.get_run(mv.run_id).data.params if mv.run_id else None
            versions[mv.version] = {
                "stage": mv.current_stage,
                "description": mv.description or "",
                "tags": dict(mv.tags),
                "params": run,
            }
        out[model.name] = {
            "description": model.description or "",
            "tags": dict(model.tags),
            "aliases": dict(client.get_registered_model(model.name).aliases),
            "versions": versions,
        }
    return out


# --- tests ----------------------------------------------------------------------------------------------


def test_backup_records_models_versions_runs_and_files(mlflow_source: MlflowLab, seeded_backup: Manifest) -> None:
    meta = seeded_backup.plugins["model-registry"].meta
    assert meta["registered_models"] == 2 and meta["model_versions"] == 5 and meta["runs"] == 4
    assert meta["artifact_locations"] == 5 and meta["files"] == 20 and meta["skipped"] == []
    names = {a.name for a in seeded_backup.artifacts if a.plugin == "model-registry"}
    assert names == {"registry.json"} | {f"files/{n}.tar" for n in range(5)}
    inventory = plugin.discover(mlflow_source.settings)
    assert inventory.counts == {"registered_models": 2, "model_versions": 5}


def test_models_setting_selects_registered_models(mlflow_source: MlflowLab) -> None:
    only = plugin.discover(mlflow_source.settings | {"models": "tokenizer"})
    assert only.counts == {"registered_models": 1, "model_versions": 2}
    with pytest.raises(SourceError, match="no-such-model"):
        plugin.discover(mlflow_source.settings | {"models": ["tokenizer", "no-such-model"]})


def test_round_trip_keeps_models_versions_aliases_and_the_gap(
    mlflow_source: MlflowLab, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    target, outcome = restored
    assert outcome.result.changed and outcome.verified, outcome.checks
    source_view, target_view = registry_view(mlflow_source), registry_view(target)
    assert target_view == source_view
    fraud = target_view["fraud-detector"]
    assert sorted(fraud["versions"]) == ["1", "3", "4"]  # version 2 stays a gap, not renumbered
    assert fraud["aliases"] == {"champion": "3", "challenger": "4"}
    assert {v: x["stage"] for v, x in fraud["versions"].items()} == {"1": "Archived", "3": "Production", "4": "Staging"}
    assert fraud["versions"]["3"]["params"] == {"lr": "0.01", "layers": "3"}
    assert target_view["tokenizer"]["versions"]["2"]["params"] is None  # the s3:// version had no run
    assert outcome.result.details["id_map"]["versions"] == {}
    assert len(outcome.result.details["id_map"]["runs"]) == 4
    # every restored source lives in the target's bucket/prefix, none in the source's
    client = target.client()
    sources = [mv.source for m in ("fraud-detector", "tokenizer") for mv in client.search_model_versions(f"name='{m}'")]
    assert all(s.startswith(target.settings["artifacts"] + "/") for s in sources), sources
    assert {c.name for c in outcome.checks} >= {"aliases", "artifact checksums", "model files loadable"}


def test_restored_model_loads_and_predicts_from_the_target(
    restored: tuple[MlflowLab, RestoreOutcome], tmp_path: Path
) -> None:
    import mlflow.pyfunc

    target, _ = restored
    with with_env(target.env() | {"MLFLOW_TRACKING_URI": target.server.url}):
        model = mlflow.pyfunc.load_model("models:/fraud-detector@champion", dst_path=str(tmp_path))
    assert model.predict([[1.0, 2.0, 4.0]]) == [3.0 * 1 + 1.0 * 2 + 0.5 * 4]
    mlmodel = yaml.safe_load((tmp_path / "MLmodel").read_text())
    assert "python_function" in mlmodel["flavors"]


def test_second_restore_changes_nothing(
    module_repo: Repository, seeded_backup: Manifest, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    target, _ = restored
    again = run_restore(module_repo, seeded_backup, plugin, target.settings)
    assert again.result.changed is False and again.verified, again.result.details["changes"]
    assert again.result.details["bytes_uploaded"] == 0


def test_conflicting_target_is_refused_before_anything_is_written(
    module_repo: Repository, seeded_backup: Manifest, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    target, _ = restored
    elsewhere = target.settings | {"artifacts": f"s3://{target.server.bucket}/elsewhere"}
    with pytest.raises(UsageError, match="exists with another source"):
        run_restore(module_repo, seeded_backup, plugin, elsewhere)
    listed = target.minio.client().list_objects_v2(Bucket=target.server.bucket, Prefix="elsewhere/")
    assert listed.get("KeyCount", 0) == 0


def test_verify_catches_a_tampered_file_and_a_restore_repairs_it(
    module_repo: Repository, seeded_backup: Manifest, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    target, _ = restored
    s3 = target.minio.client()
    key = next(
        o["Key"]
        for o in s3.list_objects_v2(Bucket=target.server.bucket, Prefix="restored/")["Contents"]
        if o["Key"].endswith("weights.json")
    )
    s3.put_object(Bucket=target.server.bucket, Key=key, Body=b'{"weights": [666]}')
    ctx = PluginRestoreContext(module_repo, seeded_backup, plugin.name)
    checks = {c.name: c for c in plugin.verify(ctx, target.settings, {})}
    assert not checks["artifact checksums"].ok and key.split("/", 1)[1] in checks["artifact checksums"].detail
    dry = run_restore(module_repo, seeded_backup, plugin, target.settings, options={"dry_run": True})
    assert (dry.checks, dry.verification, dry.verified, dry.failed) == ([], "none", False, False)  # nothing to check
    assert dry.result.changed is False and dry.result.details["would_change"] == [f"file {key}"]
    assert s3.get_object(Bucket=target.server.bucket, Key=key)["Body"].read() == b'{"weights": [666]}'
    repaired = run_restore(module_repo, seeded_backup, plugin, target.settings)
    assert repaired.result.changed and repaired.verified
    body = s3.get_object(Bucket=target.server.bucket, Key=key)["Body"].read()
    assert hashlib.sha256(body).hexdigest() != hashlib.sha256(b'{"weights": [666]}').hexdigest()


def test_dependencies_name_the_target_mlflow_and_object_store(
    module_repo: Repository, seeded_backup: Manifest, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    target, _ = restored
    deps = restore_dependencies(module_repo, plugin, seeded_backup, target.settings)
    addresses = {(d.kind, d.address) for d in deps}
    assert ("endpoint", target.server.url) in addresses
    assert ("endpoint", target.minio.api_url) in addresses
    assert ("reference", target.settings["artifacts"]) in addresses


def test_a_backup_of_no_models_verifies_to_none_not_passed(repo: Repository) -> None:
    """A registry backed up with no models (the document an empty MLflow gives) has nothing to compare: no
    check, so the verdict is "none", not a pass over zero models; no server is contacted."""
    from drtool_plugins.model_registry.backup import REGISTRY

    from drtool.servers.process import free_port

    empty = {"format": 1, "server": "http://mlflow.invalid", "models": [], "runs": {}, "skipped": []}
    with BackupSession(repo) as session:
        with session.context_for(plugin.name).artifact(REGISTRY) as sink:
            sink.write(json.dumps(empty).encode())
        manifest = session.commit()
    ctx = PluginRestoreContext(repo, manifest, plugin.name)
    down = {"url": f"http://127.0.0.1:{free_port()}", "artifacts": "s3://nowhere/models"}
    checks = plugin.verify(ctx, down, {})
    assert checks == [] and verification(checks) == "none"


def test_mlflow_down_is_a_clear_source_error(repo: Repository, cli: Cli, tmp_path: Path) -> None:
    from drtool.servers.process import free_port

    down = {"url": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(SourceError, match="unreachable"):
        plugin.discover(down)
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, down)
    assert outcome.status == "failed" and "unreachable" in (outcome.error or "")
    assert not [a for a in session.artifacts if a.plugin == plugin.name]
    store = str(tmp_path / "cli-store")
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"store": store, "sources": {"model-registry": down}}))
    cli("init", "--store", store, check=True)
    failed = cli("backup", "-p", "model-registry")
    # not assert_clean_error: drtool.backup also logs a WARNING line for the failed plugin on stderr
    errors = [line for line in failed.stderr.splitlines() if line.startswith("drtool: error: ")]
    assert failed.returncode == 7 and "Traceback" not in failed.stderr, failed.stderr
    assert len(errors) == 1 and "MLflow at" in errors[0] and "unreachable" in errors[0], failed.stderr
    assert json.loads(cli("list", "--json", check=True).stdout) == []


def test_cli_backup_and_restore(
    cli: Cli, tmp_path: Path, mlflow_source: MlflowLab, restored: tuple[MlflowLab, RestoreOutcome]
) -> None:
    """`drtool backup -p model-registry` and `drtool restore ... -p model-registry` end to end: the new backup
    restores into the round trip's target with nothing to change, and verifies there."""
    target, _ = restored
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    store = str(tmp_path / "store")
    config.write_text(yaml.safe_dump({"store": store, "sources": {"model-registry": mlflow_source.settings}}))
    cli("init", "--store", store, check=True)
    backup = json.loads(cli("backup", "-p", "model-registry", "--json", check=True).stdout)
    assert backup["status"] == "complete"
    assert backup["plugins"]["model-registry"]["meta"]["model_versions"] == 5
    args = ["restore", backup["id"], "-p", "model-registry", "--json"]
    targets = [f"{key}={value}" for key, value in target.settings.items()]
    restored_again = json.loads(cli(*args, *[a for t in targets for a in ("-t", t)], check=True).stdout)
    assert restored_again["verified"] and restored_again["changed"] is False, restored_again
    assert {c["name"] for c in restored_again["checks"]} >= {"aliases", "artifact checksums"}
    no_artifacts = [a for t in targets if not t.startswith("artifacts=") for a in ("-t", t)]
    assert_clean_error(cli(*args, *no_artifacts), 2, "needs url and artifacts")
