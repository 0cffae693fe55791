"""Immutability: a backup into a MinIO bucket with S3 Object Lock (COMPLIANCE, 1 day default retention).

Proved against the real MinIO, in both store formats: every object a backup wrote (chunks or packs, index,
manifest, key slot, config) refuses a versioned delete (even from the root user); an overwrite only adds a
version — the original stays, `drtool check --read-data` names the damaged pack and every chunk it held,
and copying the original version back makes the store whole again; a plain delete only adds a delete
marker, which `check` reports (the pack missing, and its chunks) and removing the marker undoes. With a
real restricted MinIO user (created through the MinIO admin API) the recommended write-only backup policy
of docs/reliability.md is enough for init, backup, list and check, and refuses every delete; a prune with
separate prune credentials reports the locked objects and keeps them, without failing.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from drtool_lab.components.minio import MinioServer

from drtool.repo import layout
from tests.fixtures import stores
from tests.fixtures.core import Cli
from tests.fixtures.noise import noise

MIB = 1024 * 1024
PREFIX = "dr"


def backup_policy(bucket: str) -> dict[str, Any]:
    """What a backup needs and nothing more: write, read, list; delete only its own lock objects (on a
    versioned bucket a delete adds a marker, it destroys nothing); no version deletes, no retention changes."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketObjectLockConfiguration"],
             "Resource": [f"arn:aws:s3:::{bucket}"]},
            {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"], "Resource": [f"arn:aws:s3:::{bucket}/*"]},
            {"Effect": "Allow", "Action": ["s3:DeleteObject"], "Resource": [f"arn:aws:s3:::{bucket}/{PREFIX}/locks/*"]},
        ],
    }  # fmt: skip


def prune_policy(bucket: str) -> dict[str, Any]:
    """Prune's credentials add delete and the retention read it checks before each delete."""
    policy = backup_policy(bucket)
    policy["Statement"].append(
        {
            "Effect": "Allow",
            "Action": ["s3:DeleteObject", "s3:GetObjectRetention", "s3:GetObjectLegalHold"],
            "Resource": [f"arn:aws:s3:::{bucket}/*"],
        }
    )
    return policy


@pytest.fixture
def locked_bucket(minio: MinioServer, minio_env: dict[str, str]) -> str:
    """A fresh bucket with Object Lock and a 1-day COMPLIANCE default retention (nobody can shorten it)."""
    bucket = f"locked-{uuid.uuid4().hex[:12]}"
    minio.create_bucket(bucket, object_lock=True)
    minio.client().put_object_lock_configuration(
        Bucket=bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    return bucket


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "data"
    src.mkdir()
    rng = random.Random(5)
    (src / "model.bin").write_bytes(rng.randbytes(6 * MIB))
    (src / "sa.key").write_bytes(rng.randbytes(4096))
    return src


def _configure(cli: Cli, env: dict[str, str], source: Path, **extra: Any) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"paths": [str(source)]}}, **extra}))
    cli.env.update(env)


def _versions(client: Any, bucket: str) -> list[dict[str, Any]]:
    pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket)
    return [v for page in pages for v in page.get("Versions", ())]


def _check(cli: Cli) -> tuple[int, dict[str, Any]]:
    proc = cli("check", "--read-data", "--json")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("version", stores.FORMATS)
def test_locked_backup_survives_delete_and_overwrite(
    cli: Cli,
    tmp_path: Path,
    minio: MinioServer,
    minio_env: dict[str, str],
    locked_bucket: str,
    source: Path,
    version: int,
) -> None:
    _configure(cli, minio_env, source)
    url = f"s3://{locked_bucket}/{PREFIX}"
    stores.init(cli, url, version)
    assert json.loads(cli("backup", "-p", "files", "--json", check=True).stdout)["status"] == "complete"
    root = minio.client()  # the most powerful credentials there are
    versions = [v for v in _versions(root, locked_bucket) if "/locks/" not in v["Key"]]
    kinds = {
        "drtool-store.json",
        "keys",
        "keyring",
        "manifests",
        *(("packs", "index") if version == 2 else ("chunks",)),
    }
    assert {v["Key"].split("/")[1] for v in versions} == kinds  # every kind of object a backup writes
    refused = 0
    for v in versions:
        head = root.head_object(Bucket=locked_bucket, Key=v["Key"], VersionId=v["VersionId"])
        assert head["ObjectLockMode"] == "COMPLIANCE", v["Key"]  # the bucket default applied to drtool's writes
        with pytest.raises(ClientError) as refusal:
            root.delete_object(Bucket=locked_bucket, Key=v["Key"], VersionId=v["VersionId"])
        assert refusal.value.response["Error"]["Code"] in ("AccessDenied", "InvalidRequest"), refusal.value.response
        refused += 1
    print(f"\n{refused} versioned deletes refused")
    assert _check(cli)[0] == 0

    # overwrite an object holding chunks (format 1: one chunk; format 2: a pack): S3 keeps the original as a
    # noncurrent version; check names the damaged pack and every chunk it held
    repo = stores.open_repo(cli, url)
    name = stores.chunk_objects(repo)[0]
    held = stores.holding(repo, name)
    chunk = next(v for v in versions if v["Key"] == f"{PREFIX}/{name}")
    original = root.get_object(Bucket=locked_bucket, Key=chunk["Key"])["Body"].read()
    root.put_object(Bucket=locked_bucket, Key=chunk["Key"], Body=b"ransomware was here")
    code, report = _check(cli)
    assert code == 4 and not report["ok"]
    assert set(report["damaged_chunks"]) == held, report["damaged_chunks"]
    assert list(report["damaged_packs"]) == ([layout.pack_id_of(name)] if version == 2 else []), report
    text = cli("check", "--read-data").stdout
    assert ("damaged pack" in text) == (version == 2) and "damaged chunk" in text, text
    kept = root.get_object(Bucket=locked_bucket, Key=chunk["Key"], VersionId=chunk["VersionId"])["Body"].read()
    assert kept == original  # nothing was destroyed
    source_ref = {"Bucket": locked_bucket, "Key": chunk["Key"], "VersionId": chunk["VersionId"]}
    root.copy_object(Bucket=locked_bucket, Key=chunk["Key"], CopySource=source_ref)
    assert _check(cli)[0] == 0

    # a plain delete adds a delete marker: check reports the chunks missing; removing the marker undoes it
    marker = root.delete_object(Bucket=locked_bucket, Key=chunk["Key"])
    assert marker.get("DeleteMarker") is True
    code, report = _check(cli)
    assert code == 4 and set(report["missing_chunks"]) == held, report
    assert list(report["missing_packs"]) == ([layout.pack_id_of(name)] if version == 2 else []), report
    root.delete_object(Bucket=locked_bucket, Key=chunk["Key"], VersionId=marker["VersionId"])
    assert _check(cli)[0] == 0
    restored = tmp_path / "restored"
    cli("restore", "latest", "-p", "files", "-t", f"path={restored}", check=True)
    assert [p.read_bytes() for p in restored.rglob("model.bin")] == [(source / "model.bin").read_bytes()]


def _admin(minio: MinioServer) -> Any:
    from minio.credentials import StaticProvider
    from minio.minioadmin import MinioAdmin

    endpoint = urlsplit(minio.api_url).netloc
    return MinioAdmin(endpoint=endpoint, credentials=StaticProvider(minio.root_user, minio.root_password), secure=False)


@pytest.fixture
def restricted_users(minio: MinioServer, locked_bucket: str) -> Iterator[dict[str, dict[str, str]]]:
    """Two real MinIO users: ``backup`` with the write-only policy, ``prune`` with delete added."""
    admin = _admin(minio)
    users: dict[str, dict[str, str]] = {}
    for role, policy in (("backup", backup_policy(locked_bucket)), ("prune", prune_policy(locked_bucket))):
        name = f"{role}-{locked_bucket}"
        secret = uuid.uuid4().hex
        admin.policy_add(name, policy=policy)
        admin.user_add(name, secret)
        admin.attach_policy([name], user=name)
        users[role] = {**minio.env(), "AWS_ACCESS_KEY_ID": name, "AWS_SECRET_ACCESS_KEY": secret}
    yield users
    for role in users:
        name = f"{role}-{locked_bucket}"
        admin.user_remove(name)
        admin.policy_remove(name)


def _client(env: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )


def test_write_only_credentials_and_prune_of_locked_objects(
    cli: Cli, minio: MinioServer, locked_bucket: str, source: Path, restricted_users: dict[str, dict[str, str]]
) -> None:
    sets = {"nightly": {"plugins": ["files"], "cron": "0 2 * * *", "retention": {"keep_last": 1}}}
    _configure(cli, restricted_users["backup"], source, backup_sets=sets)
    cli("init", "--store", f"s3://{locked_bucket}/{PREFIX}", check=True)
    ids = []
    for seed in range(2):
        (source / "delta.bin").write_bytes(noise(MIB, seed))
        ids.append(json.loads(cli("backup", "--set", "nightly", "--json", check=True).stdout)["id"])
    assert [b["id"] for b in json.loads(cli("list", "--json", check=True).stdout)] == ids
    assert _check(cli)[0] == 0

    writer = _client(restricted_users["backup"])
    stored = [v for v in _versions(minio.client(), locked_bucket) if "/locks/" not in v["Key"]]
    for v in stored[:5]:  # the backup credentials cannot delete what they wrote, by version or not
        for kwargs in ({"VersionId": v["VersionId"]}, {}):
            with pytest.raises(ClientError) as refusal:
                writer.delete_object(Bucket=locked_bucket, Key=v["Key"], **kwargs)
            assert refusal.value.response["Error"]["Code"] == "AccessDenied"
    denied = cli("prune")  # prune with the backup credentials: refused cleanly
    assert denied.returncode in (3, 5) and "Traceback" not in denied.stderr, denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1, denied.stderr
    print(f"\nprune with the backup credentials: exit {denied.returncode}: {denied.stderr.strip()}")

    cli.env.update(restricted_users["prune"])
    pruned = cli("prune", "--json")
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)
    old_manifest = next(name for name in report["locked_objects"] if ids[0] in name)
    assert "compliance retention until" in report["locked_objects"][old_manifest]
    assert report["forgotten"] == [] and report["chunks_deleted"] == 0
    text = cli("prune", check=True).stdout
    assert "under Object Lock kept" in text
    assert [b["id"] for b in json.loads(cli("list", "--json", check=True).stdout)] == ids
    assert _check(cli)[0] == 0  # nothing lost
