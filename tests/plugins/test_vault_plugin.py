"""The vault plugin against real OpenBao servers (raft storage, Shamir seal): a seeded source, fresh targets.

Reads that check a restore go through hvac directly with the source's own root token, not through the
plugin, so a bug in the plugin cannot hide in both the write and the check.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

import hvac
import pytest
from drtool_plugins.vault import VaultPlugin

from drtool.errors import UsageError, WrongKey
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import restore_dependencies, run_restore
from drtool.servers.openbao import OpenBaoServer, health
from tests.fixtures.core import Cli, assert_clean_error

plugin = VaultPlugin()
Source = tuple[OpenBaoServer, dict[str, Any]]


def backup(repo: Repository, settings: dict[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, settings)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def kv_read(client: hvac.Client, mount: str, path: str, version: int | None = None) -> dict[str, Any]:
    return client.secrets.kv.v2.read_secret_version(
        path, version=version, mount_point=mount, raise_on_deleted_version=True
    )["data"]["data"]


def test_snapshot_restore_into_a_fresh_openbao(
    repo: Repository, openbao_source: Source, openbao_fresh: OpenBaoServer
) -> None:
    source, settings = openbao_source
    counts = plugin.discover(settings).counts
    assert counts["kv_mounts"] == 2 and counts["auth_mounts"] == 2 and counts["policies"] >= 4
    manifest = backup(repo, settings)
    meta = manifest.plugins["vault"].meta
    assert {a.name for a in manifest.artifacts} == {
        "raft.snap",
        "kv/secret.ndjson",
        "kv/platform.ndjson",
        "escrow.json",
    }
    assert all(a.sensitive for a in manifest.artifacts)
    escrowed = source.credentials()
    assert escrowed["root_token"] not in json.dumps(meta) and escrowed["unseal_keys_b64"][0] not in json.dumps(meta)
    assert meta["seal"] == {"type": "shamir", "shares": 3, "threshold": 2} and meta["escrow"]["keys"] == 3

    target = {"address": openbao_fresh.address}
    deps = restore_dependencies(repo, plugin, manifest, target)
    assert any(d.kind == "credential" and "escrow" in d.address for d in deps)
    dry = run_restore(repo, manifest, plugin, target, options={"dry_run": True})
    assert (dry.checks, dry.verification, dry.verified, dry.failed) == ([], "none", False, False)  # nothing to check
    assert "would initialize" in dry.result.summary and health(openbao_fresh.address)["initialized"] is False
    outcome = run_restore(repo, manifest, plugin, target)
    assert outcome.result.changed and outcome.result.details["trial"] is True
    assert outcome.verified, [c for c in outcome.checks if not c.ok]

    # read back independently, with the SOURCE's root token: the restored Vault is the source cluster
    restored = hvac.Client(url=openbao_fresh.address, token=escrowed["root_token"])
    assert kv_read(restored, "secret", "ml/mlflow-db") == {"user": "mlflow", "password": "pw-2"}
    versions = restored.secrets.kv.v2.read_secret_metadata("ml/mlflow-db", mount_point="secret")["data"]["versions"]
    assert versions["1"]["deletion_time"] and versions["2"]["destroyed"]
    assert "ml-reader" in restored.sys.list_acl_policies()["data"]["keys"]
    login = hvac.Client(url=openbao_fresh.address).auth.userpass.login("trainer", "lab-only-password")
    assert "ml-reader" in login["auth"]["policies"]

    again = run_restore(repo, manifest, plugin, target)
    assert again.result.changed is False and again.verified

    # in use at once: an application rotates its password (a new version) -- listed, not failed
    restored.secrets.kv.v2.create_or_update_secret("ml/mlflow-db", secret={"user": "mlflow", "password": "pw-3"},
                                                   mount_point="secret")  # fmt: skip
    ctx = PluginRestoreContext(repo, manifest, "vault")
    kv = {c.name: c for c in plugin.verify(ctx, target, {})}["KV secret: secrets equal the backup's"]
    assert kv.ok and "written since the restore (not compared): ml/mlflow-db v4" in kv.detail, kv.detail
    # a version the restore wrote, destroyed since: that fails
    restored.secrets.kv.v2.destroy_secret_versions("ml/mlflow-db", versions=[3], mount_point="secret")
    kv = {c.name: c for c in plugin.verify(ctx, target, {})}["KV secret: secrets equal the backup's"]
    assert not kv.ok and "ml/mlflow-db" in kv.detail


def test_wrong_unseal_key_leaves_the_target_untouched(
    cli: Cli, tmp_path: Path, openbao_source: Source, openbao_fresh: OpenBaoServer
) -> None:
    _source, settings = openbao_source
    wrong = tmp_path / "stale-keys.txt"  # an operator's stale escrow: right shape, wrong keys
    wrong.write_text("\n".join(base64.b64encode(secrets.token_bytes(33)).decode() for _ in range(3)))
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    source = settings | {"unseal_keys_file": str(wrong)}
    config.write_text(json.dumps({"store": str(tmp_path / "store"), "sources": {"vault": source}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    made = json.loads(cli("backup", "--json", check=True).stdout)
    assert made["status"] == "complete"
    proc = cli("restore", made["id"], "-p", "vault", "-t", f"address={openbao_fresh.address}")
    assert_clean_error(proc, WrongKey.exit_code, "escrowed unseal keys", "do not unseal", "was not touched")
    assert health(openbao_fresh.address)["initialized"] is False  # the trial failed: the target was never touched
    assert Path(settings["token_file"]).read_text().strip() not in proc.stdout + proc.stderr


def test_kv_restore_into_an_existing_vault(repo: Repository, openbao_source: Source, openbao_kv_target: Any) -> None:
    _source, settings = openbao_source
    manifest = backup(repo, settings | {"snapshot": False, "unseal_keys_file": None})
    assert {a.name for a in manifest.artifacts} == {"kv/secret.ndjson", "kv/platform.ndjson"}
    server, token_env = openbao_kv_target
    target = {"address": server.address, "token_env": token_env}
    with pytest.raises(UsageError, match="holds no raft snapshot"):
        run_restore(repo, manifest, plugin, target, options={"mode": "snapshot"})

    dry = run_restore(repo, manifest, plugin, target, options={"dry_run": True})
    assert dry.result.details["mounts"] == {"secret": {"replayed": 2}, "platform": {"replayed": 5}}
    client = hvac.Client(url=server.address, token=os.environ[token_env])
    assert "secret/" not in client.sys.list_mounted_secrets_engines()["data"]
    outcome = run_restore(repo, manifest, plugin, target)
    assert outcome.result.changed and outcome.verified, outcome.checks
    assert kv_read(client, "secret", "ml/mlflow-db") == {"user": "mlflow", "password": "pw-2"}
    assert kv_read(client, "platform", "teams/team-0/registry", version=1) == {"token": "t-0"}
    meta = client.secrets.kv.v2.read_secret_metadata("ml/mlflow-db", mount_point="secret")["data"]
    assert meta["current_version"] == 3 and meta["custom_metadata"] == {"owner": "ml-platform"}
    assert meta["versions"]["1"]["deletion_time"] and meta["versions"]["2"]["destroyed"]

    again = run_restore(repo, manifest, plugin, target)
    assert again.result.changed is False and again.verified

    # a secret changed on the target: existing=fail refuses before writing anything
    client.secrets.kv.v2.create_or_update_secret("ml/s3-checkpoints", secret={"key": "drifted"}, mount_point="secret")
    client.secrets.kv.v2.delete_metadata_and_all_versions("teams/team-1/registry", mount_point="platform")
    with pytest.raises(UsageError, match="exists in the target Vault with other data"):
        run_restore(repo, manifest, plugin, target, options={"existing": "fail"})
    with pytest.raises(hvac.exceptions.InvalidPath):
        client.secrets.kv.v2.read_secret_metadata("teams/team-1/registry", mount_point="platform")
    fixed = run_restore(repo, manifest, plugin, target)
    assert fixed.result.details["mounts"]["secret"]["updated"] == 1 and fixed.verified


def test_unreachable_vault_and_inline_token_fail_cleanly(repo: Repository) -> None:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"address": "http://127.0.0.1:1", "token_env": "NO_SUCH_VAR"})
    assert outcome.status == "failed" and "127.0.0.1:1" in outcome.error
    with pytest.raises(UsageError, match="must not be written in settings"):
        plugin.discover({"address": "http://127.0.0.1:1", "token": "s.inline"})


def test_escrow_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The escrow reads `bao operator init -format=json` output or one key per line, from a file or a variable."""
    from drtool_plugins.vault import escrow

    init = {"unseal_keys_b64": ["a2V5MQ==", "a2V5Mg=="], "unseal_threshold": 2, "root_token": "s.root"}
    (tmp_path / "init.json").write_text(json.dumps(init))
    loaded = escrow.load({"unseal_keys_file": str(tmp_path / "init.json")})
    assert loaded is not None and loaded.unseal_keys == ("a2V5MQ==", "a2V5Mg==") and loaded.root_token == "s.root"
    monkeypatch.setenv("BAO_KEYS", "a2V5MQ==\na2V5Mg==\n")
    from_env = escrow.load({"unseal_keys_env": "BAO_KEYS", "escrow_root_token": False})
    assert from_env is not None and from_env.root_token is None and from_env.held_in == "environment variable BAO_KEYS"
    assert escrow.load({}) is None
    with pytest.raises(UsageError, match="holds no unseal keys"):
        escrow.parse("{}", "file x", True)
