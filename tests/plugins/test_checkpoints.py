"""The checkpoints plugin against a real MinIO: completeness per kind, torn copies, incremental reuse,
restore into another bucket with tensors loaded back, a source MinIO that dies mid-transfer, the CLI."""

from __future__ import annotations

import io
import json
import os
import pickle
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from drtool_lab.components.minio import MinioServer
from drtool_lab.lab import Lab
from drtool_lab.plugins.checkpoints import seed_bucket
from drtool_lab.support import lab_support
from drtool_plugins.checkpoints import CheckpointsPlugin, dcp, samples
from drtool_plugins.checkpoints import location as loc_mod
from drtool_plugins.checkpoints.retention import backups_to_keep
from safetensors.numpy import load as st_load

from drtool.backup import run_backup
from drtool.errors import SourceError, UsageError
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.restore import run_restore
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.minio import minio_lab

pytestmark = pytest.mark.minio
PLUGIN = CheckpointsPlugin()


_CLIENTS: dict[str, Any] = {}


def s3(minio: MinioServer) -> Any:
    """A client set up like the plugin's (see ``location.no_empty_continue``: empty markers are PUT here)."""
    import boto3
    from botocore.config import Config

    config = Config(
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    if minio.api_url not in _CLIENTS:
        creds = {"aws_access_key_id": minio.root_user, "aws_secret_access_key": minio.root_password}
        session = boto3.session.Session()
        _CLIENTS[minio.api_url] = session.client("s3", endpoint_url=minio.api_url, config=config, **creds)
        loc_mod.no_empty_continue(_CLIENTS[minio.api_url])
    return _CLIENTS[minio.api_url]


def putter(minio: MinioServer, bucket: str, prefix: str = "ck") -> Callable[[str, bytes], None]:
    client = s3(minio)
    return lambda key, data: client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)


def source(minio: MinioServer, bucket: str, **extra: Any) -> dict[str, Any]:
    return {"sources": [{"name": "train", "url": f"s3://{bucket}/ck", "endpoint_url": minio.api_url}], **extra}


def get(minio: MinioServer, bucket: str, key: str) -> bytes:
    return s3(minio).get_object(Bucket=bucket, Key=key)["Body"].read()


def backup(repo: Repository, src: dict[str, Any]) -> Any:
    manifest = run_backup(repo, [PLUGIN], {"checkpoints": src})
    return manifest, manifest.plugins["checkpoints"].meta


def test_completeness_of_each_kind(repo: Repository, minio: MinioServer, minio_env: dict, bucket: str) -> None:
    put = putter(minio, bucket)
    seed_bucket(s3(minio), bucket, "ck")
    rng = np.random.default_rng(3)
    # a DCP checkpoint whose second shard is shorter than .metadata says, another missing a shard
    meta, shards = samples.dcp_metadata(samples.random_tensors(rng, 4, (16, 16)), ranks=2)
    put("llama-ft/step-400/__0_0.distcp", shards["__0_0.distcp"])
    put("llama-ft/step-400/__1_0.distcp", shards["__1_0.distcp"][:-10])
    put("llama-ft/step-400/.metadata", meta)
    put("llama-ft/step-500/__0_0.distcp", shards["__0_0.distcp"])
    put("llama-ft/step-500/.metadata", meta)
    # a safetensors shard cut short, and a truncated container archive
    whole = samples.safetensors_bytes(samples.random_tensors(rng, 2, (8, 8)))
    put("bert-base/checkpoint-700/model.safetensors", whole[:-4])
    # a sharded save killed before its index: every shard written is whole, yet the checkpoint is torn
    put("bert-base/checkpoint-800/model-00001-of-00003.safetensors", whole)
    archive = samples.container_archive({"pages-1.img": rng.bytes(1 << 14)})
    put("kubelet/checkpoint-web-0_ml-app-2026-11-29T11-00-00Z.tar", archive[:4096])

    inv = PLUGIN.discover(source(minio, bucket))
    assert inv.counts["checkpoints"] == 5 and inv.counts["incomplete"] == 8
    manifest, meta_out = backup(repo, source(minio, bucket))
    done = {c["checkpoint"]: c for c in meta_out["checkpoints"]}
    reasons = {s["checkpoint"]: s["reason"] for s in meta_out["skipped"]}
    assert set(done) == {
        "llama-ft/step-100",
        "llama-ft/step-200",
        "bert-base/checkpoint-500",
        "rl-agent/iter-40",
        "kubelet/checkpoint-trainer-0_ml-trainer-2026-11-29T10-00-00Z.tar",
    }
    assert {done[k]["kind"] for k in done} == {"dcp", "safetensors", "marker", "container"}
    assert ".metadata.tmp present" in reasons["llama-ft/step-300"]
    assert "__1_0.distcp" in reasons["llama-ft/step-400"] and "needs at least" in reasons["llama-ft/step-400"]
    assert "__1_0.distcp" in reasons["llama-ft/step-500"] and "missing" in reasons["llama-ft/step-500"]
    assert "gone named in model.safetensors.index.json is missing" in reasons["bert-base/checkpoint-600"]
    assert "header describes" in reasons["bert-base/checkpoint-700"]
    assert reasons["bert-base/checkpoint-800"] == "1 of 3 shards and no index: the sharded save has not finished"
    assert "no completion marker" in reasons["rl-agent/iter-50"]
    assert "truncated" in reasons["kubelet/checkpoint-web-0_ml-app-2026-11-29T11-00-00Z.tar"]
    assert done["llama-ft/step-200"]["run"] == "llama-ft" and done["llama-ft/step-200"]["step"] == 200
    arts = {a.name: a for a in manifest.artifacts}
    assert arts["train/kubelet/checkpoint-trainer-0_ml-trainer-2026-11-29T10-00-00Z.tar"].sensitive
    assert not arts["train/llama-ft/step-100/.metadata"].sensitive
    assert not any("step-300" in n or "iter-50" in n for n in arts), "incomplete checkpoints are not stored"
    # the source's own checksum was checked while reading
    assert arts["train/rl-agent/iter-40/policy.bin"].meta["source_checksums"] == ["md5"]  # single-part ETag


def test_hostile_dcp_metadata_is_never_unpickled(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, tmp_path: Path
) -> None:
    canary = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {canary}",))

    put = putter(minio, bucket)
    put("run/step-1/__0_0.distcp", b"x" * 64)
    put("run/step-1/.metadata", pickle.dumps(Evil()))
    _, meta = backup(repo, source(minio, bucket))
    assert meta["checkpoints"] == []
    assert "is not DCP metadata" in meta["skipped"][0]["reason"]
    assert not canary.exists()
    with pytest.raises(Exception, match="not DCP metadata"):
        dcp.load_metadata(pickle.dumps(Evil()))


def _eight_shards(put: Callable[[str, bytes], None], rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    shards = [samples.random_tensors(rng, 2, (256, 1024), f"block{i}") for i in range(8)]  # 2 MiB each
    samples.write_safetensors(put, "run/checkpoint-1000", shards)
    return shards


def test_incremental_uploads_only_the_changed_shard(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str
) -> None:
    put = putter(minio, bucket)
    rng = np.random.default_rng(11)
    shards = _eight_shards(put, rng)
    first, m1 = backup(repo, source(minio, bucket))
    assert m1["objects_read"] == 9 and m1["objects_reused"] == 0
    shards[3] = samples.random_tensors(rng, 2, (256, 1024), "block3")
    put("run/checkpoint-1000/model-00004-of-00008.safetensors", samples.safetensors_bytes(shards[3]))
    second, m2 = backup(repo, source(minio, bucket))
    assert m2["objects_read"] == 1 and m2["objects_reused"] == 8
    ratio = second.stats["bytes_stored"] / first.stats["bytes_stored"]
    assert 0.09 < ratio < 0.16, ratio  # about one eighth
    assert m2["bytes_read"] == len(samples.safetensors_bytes(shards[3]))
    changed = len(samples.safetensors_bytes(shards[3]))
    assert m2["summary"] == (
        f"8 unchanged object(s), {m2['bytes_reused']} bytes, not read; 1 read ({changed} bytes)"
    ), m2["summary"]
    third, m3 = backup(repo, source(minio, bucket))
    assert m3["objects_read"] == 0 and third.stats["bytes_stored"] == 0
    assert third.stats["bytes_read"] == 0 and third.stats["bytes_reused"] == third.size  # what the CLI reports
    # forcing a re-read still stores nothing new: the chunks are deduplicated
    fourth, m4 = backup(repo, source(minio, bucket, reread=True))
    assert m4["objects_read"] == 9 and fourth.stats["bytes_stored"] == 0
    # and so does `drtool backup --force-read`: no earlier backup is built on
    fifth = run_backup(repo, [PLUGIN], {"checkpoints": source(minio, bucket)}, force_read=True)
    assert fifth.plugins["checkpoints"].meta["objects_read"] == 9 and fifth.stats["bytes_reused"] == 0


def test_restore_into_another_bucket_and_load_tensors(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str
) -> None:
    put = putter(minio, bucket)
    rng = np.random.default_rng(5)
    shards = _eight_shards(put, rng)
    tensors = samples.random_tensors(rng, 6, (32, 48))
    samples.write_dcp(put, "run/step-7", tensors, ranks=3)
    manifest, _ = backup(repo, source(minio, bucket))
    target_bucket = f"restored-{uuid.uuid4().hex[:8]}"
    minio.create_bucket(target_bucket)
    target = {"url": f"s3://{target_bucket}/resume", "endpoint_url": minio.api_url}

    order: list[str] = []
    real_put = loc_mod.S3Location.put

    def recording_put(self: Any, key: str, *args: Any) -> None:
        real_put(self, key, *args)
        order.append(key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loc_mod.S3Location, "put", recording_put)
        outcome = run_restore(repo, manifest, PLUGIN, target)
    assert outcome.result.changed and outcome.verified, outcome.checks
    st_order = [k for k in order if k.startswith("run/checkpoint-1000/")]
    assert st_order[-1] == "run/checkpoint-1000/model.safetensors.index.json", "the index is written last"
    dcp_order = [k for k in order if k.startswith("run/step-7/")]
    assert dcp_order[-1] == "run/step-7/.metadata", ".metadata is written last"

    for i, shard in enumerate(shards, 1):
        data = get(minio, target_bucket, f"resume/run/checkpoint-1000/model-{i:05d}-of-00008.safetensors")
        loaded = st_load(data)
        assert set(loaded) == set(shard) and all(np.array_equal(loaded[k], shard[k]) for k in shard)
    meta = dcp.load_metadata(get(minio, target_bucket, "resume/run/step-7/.metadata"))
    for index, info in meta.field("storage_data").items():
        fqn = index.field("fqn")
        raw = get(minio, target_bucket, f"resume/run/step-7/{info.field('relative_path')}")
        start, length = info.field("offset"), info.field("length")
        back = np.frombuffer(raw[start : start + length], dtype=np.float32).reshape(tensors[fqn].shape)
        assert np.array_equal(back, tensors[fqn])

    again = run_restore(repo, manifest, PLUGIN, target)
    assert not again.result.changed and again.verified
    s3(minio).put_object(Bucket=target_bucket, Key="resume/run/step-7/__0_0.distcp", Body=b"tampered")
    checks = PLUGIN.verify(PluginRestoreContext(repo, manifest, "checkpoints"), target, {})
    assert not all(c.ok for c in checks)
    with pytest.raises(UsageError, match="differ from the backup"):
        run_restore(repo, manifest, PLUGIN, target)
    fixed = run_restore(repo, manifest, PLUGIN, target, options={"overwrite": "true"})
    assert fixed.result.changed and fixed.verified


class _RewriteOnRead:
    """Wraps S3Location.open: while ``key`` is being read, the trainer writes it anew.

    The reader gets the old version's bytes, and the new version lands before the plugin lists the
    checkpoint again. (The old bytes are fetched whole before the PUT: a PUT issued while a GET of the
    same object is still open stalled for about 30 s on this MinIO.)
    """

    def __init__(self, minio: MinioServer, bucket: str, key: str, times: int) -> None:
        self.minio, self.bucket, self.key, self.times = minio, bucket, key, times
        self.real = loc_mod.S3Location.open
        self.rewrites = 0

    def __call__(self, loc: Any, key: str, expect: Any) -> Any:
        import contextlib

        hook = self

        @contextlib.contextmanager
        def opened() -> Iterator[Any]:
            if not (key.endswith(hook.key) and hook.rewrites < hook.times):
                with hook.real(loc, key, expect) as opened_stream:
                    yield opened_stream
                return
            old = get(hook.minio, hook.bucket, f"ck/{key}")
            hook.rewrites += 1
            new = np.random.default_rng(hook.rewrites).bytes(len(old))
            s3(hook.minio).put_object(Bucket=hook.bucket, Key=f"ck/{key}", Body=new)
            yield io.BytesIO(old), {}

        return opened()


def test_checkpoint_rewritten_during_backup_is_retried(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put = putter(minio, bucket)
    put("run/step-9/weights.bin", np.random.default_rng(0).bytes(1 << 20))
    put("run/step-9/COMPLETE", b"")
    hook = _RewriteOnRead(minio, bucket, "weights.bin", times=1)
    monkeypatch.setattr(loc_mod.S3Location, "open", lambda loc, key, expect: hook(loc, key, expect))
    manifest, meta = backup(repo, source(minio, bucket))
    assert hook.rewrites == 1 and meta["torn_retries"] == 1
    assert [c["checkpoint"] for c in meta["checkpoints"]] == ["run/step-9"]
    with PluginRestoreContext(repo, manifest, "checkpoints").open("train/run/step-9/weights.bin") as r:
        assert r.read() == get(minio, bucket, "ck/run/step-9/weights.bin"), "the stored copy is the new version"


def test_checkpoint_that_keeps_changing_is_skipped(
    repo: Repository, minio: MinioServer, minio_env: dict, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put = putter(minio, bucket)
    put("run/step-9/weights.bin", np.random.default_rng(0).bytes(1 << 20))
    put("run/step-9/COMPLETE", b"")
    put("run/step-8/weights.bin", b"w" * 1000)
    put("run/step-8/COMPLETE", b"")
    hook = _RewriteOnRead(minio, bucket, "step-9/weights.bin", times=99)
    monkeypatch.setattr(loc_mod.S3Location, "open", lambda loc, key, expect: hook(loc, key, expect))
    manifest, meta = backup(repo, source(minio, bucket, retries=1))
    assert [c["checkpoint"] for c in meta["checkpoints"]] == ["run/step-8"]
    assert "changed during backup on each of 2 attempts" in meta["skipped"][0]["reason"]
    assert not any("step-9" in a.name for a in manifest.artifacts), "a torn checkpoint is never stored"


def test_directory_source_and_target(repo: Repository, tmp_path: Path) -> None:
    src = tmp_path / "vol"

    def put(key: str, data: bytes) -> None:
        (src / key).parent.mkdir(parents=True, exist_ok=True)
        (src / key).write_bytes(data)

    rng = np.random.default_rng(2)
    samples.write_safetensors(put, "hf/checkpoint-50", [samples.random_tensors(rng, 2, (16, 16), "a")])
    put("hf/checkpoint-50/trainer_state.json", b'{"global_step": 50}')
    put("hf/checkpoint-60/model-00001-of-00001.safetensors", b"\x08\x00")
    manifest, meta = backup(repo, {"sources": [{"name": "vol", "path": str(src), "milestones": ["*-50"]}]})
    assert [c["checkpoint"] for c in meta["checkpoints"]] == ["hf/checkpoint-50"]
    assert meta["checkpoints"][0]["milestone"] is True
    assert meta["checkpoints"][0]["commit"][-1] == "hf/checkpoint-50/trainer_state.json"
    dest = tmp_path / "restored"
    outcome = run_restore(repo, manifest, PLUGIN, {"path": str(dest)})
    assert outcome.verified and (dest / "hf/checkpoint-50/trainer_state.json").read_bytes() == b'{"global_step": 50}'
    assert not list(dest.rglob(".drtool-partial-*"))
    assert not run_restore(repo, manifest, PLUGIN, {"path": str(dest)}).result.changed


def test_source_minio_stopping_mid_transfer(repo: Repository, lab_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with minio_lab(lab_root, "ckpt-flaky") as server:
        server.create_bucket("train")
        put = putter(server, "train")
        for i in range(4):
            put(f"run/step-1/shard-{i}.bin", np.random.default_rng(i).bytes(4 << 20))
        put("run/step-1/COMPLETE", b"")
        keys = str(server.credentials_file())
        source = {"name": "train", "url": "s3://train/ck", "endpoint_url": server.api_url, "credentials_file": keys}
        src = {"sources": [source], "workers": 1}
        real = loc_mod.S3Location.open
        stopped = threading.Event()

        def stop_then_open(loc: Any, key: str, expect: Any) -> Any:
            if key.endswith("shard-2.bin") and not stopped.is_set():
                stopped.set()
                server.stop()
            return real(loc, key, expect)

        monkeypatch.setattr(loc_mod.S3Location, "open", stop_then_open)
        with pytest.raises(SourceError) as err:
            run_backup(repo, [PLUGIN], {"checkpoints": src})
        assert "nothing was written" in err.value.one_line() and "\n" not in err.value.one_line()
        assert repo.backup_ids() == [], "no backup is visible"
        server.start()
        manifest = run_backup(repo, [PLUGIN], {"checkpoints": src})
        assert manifest.status == "complete" and len(manifest.artifacts) == 5


def test_cli_backup_restore_with_lab_support(cli: Cli, tmp_path: Path, lab_root: Path) -> None:
    lab = Lab("ckpt-cli", root=lab_root)
    try:
        src = lab_support("checkpoints").seed(lab)  # type: ignore[union-attr]
        target = lab_support("checkpoints").target(lab)  # type: ignore[union-attr]
        config = cli.home / ".config/drtool/config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text(yaml.safe_dump({"store": str(tmp_path / "store"), "sources": {"checkpoints": src}}))
        env = {"DRTOOL_LAB_DIR": str(lab_root), "DRTOOL_PLUGINS": "checkpoints"}
        cli("init", "--store", str(tmp_path / "store"), check=True, env=env)
        out = json.loads(cli("backup", "--json", check=True, env=env).stdout)
        meta = out["plugins"]["checkpoints"]["meta"]
        assert out["status"] == "complete" and len(meta["checkpoints"]) == 5 + 2  # the samples, the trainer's 10 and 20
        torn = next(s for s in meta["skipped"] if s["checkpoint"] == "mlp/step-000030")  # killed in its save
        assert torn["reason"] == "2 of 3 shards and no index: the sharded save has not finished"
        at = [f"-t{k}={target[k]}" for k in ("endpoint_url", "credentials_file")]
        args = ["restore", out["id"], "-p", "checkpoints", "-t", f"url={target['url']}", *at]
        restored = json.loads(cli(*args, "--json", check=True, env=env).stdout)
        assert restored["verified"] and restored["changed"]
        bad = cli("restore", out["id"], "-p", "checkpoints", "-t", "url=s3://", *at, env=env)
        assert_clean_error(bad, 2, "names no bucket")
    finally:
        lab.down()


def test_retention_hook_keeps_last_per_run_and_milestones() -> None:
    def ck(run: str, step: int, milestone: bool = False) -> dict[str, Any]:
        return {"source": "s", "run": run, "checkpoint": f"{run}/step-{step}", "step": step, "milestone": milestone}

    backups = [
        ("b1", {"checkpoints": [ck("a", 1, milestone=True), ck("b", 1)]}),
        ("b2", {"checkpoints": [ck("a", 1, milestone=True), ck("a", 2), ck("b", 1)]}),
        ("b3", {"checkpoints": [ck("a", 3), ck("a", 4)]}),
    ]
    keep = backups_to_keep(backups, keep_last_per_run=2)
    assert set(keep) == {"b2", "b3"}
    assert any("milestone" in r for r in keep["b2"]) and any("run b" in r for r in keep["b2"])
    assert len(keep["b3"]) == 2


def test_s3_keys_come_from_a_credentials_file_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    """A lab MinIO's keys (or a mounted Secret's) reach the plugin as a file the settings name, never inline."""
    keys = tmp_path / "keys"
    keys.write_text("[default]\naws_access_key_id = AKLAB\naws_secret_access_key = lab-secret\n")
    credentials = loc_mod.s3_client("http://127.0.0.1:9", str(keys))._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key) == ("AKLAB", "lab-secret")
    for bad, says in ((tmp_path / "missing", "cannot be read"), (tmp_path, "cannot be read")):
        with pytest.raises(UsageError) as err:
            loc_mod.s3_client(None, str(bad))
        assert says in err.value.one_line() and "credentials_file" in err.value.one_line()
    keys.write_text("[other]\naws_access_key_id = AKLAB\n")
    with pytest.raises(UsageError, match=r"has no \[default\] section"):
        loc_mod.s3_client(None, str(keys))
