"""The etcd plugin against real etcd servers and the real store: backup, restore into a new member, verify."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.etcd_seed import gateway, settings_of
from drtool_plugins.etcd import EtcdPlugin
from drtool_plugins.etcd.restore import MARKER_SUFFIX, SCRATCH_PREFIX, bump_supported
from drtool_plugins.etcd.snapshot import SnapshotDigest

from drtool.binaries import etcd_binary
from drtool.errors import IntegrityError, SourceError, UsageError
from drtool.plugin.contract import Plugin
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import restore_dependencies
from drtool.servers import process
from drtool.servers.etcd import EtcdServer
from tests.fixtures.etcd import CorruptingProxy, etcdctl_dump
from tests.fixtures.noise import noise

plugin = EtcdPlugin()


def backup(repo: Repository, source: Mapping[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, source)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def target_for(tmp_path: Path, lab_root: Path, **extra: Any) -> dict[str, Any]:
    """A restore target in a NEW place: new data dir, member name and cluster token."""
    return {
        "data_dir": str(tmp_path / "restored" / "data"),
        "name": "rebuilt-0",
        "initial_cluster_token": f"new-token-{os.getpid()}",
        "start": True,
        "lab_dir": str(lab_root / f"restored-{tmp_path.name}"),
        **extra,
    }


def failed(checks: list[Any]) -> list[Any]:
    return [c for c in checks if not c.ok]


# --- backup ---------------------------------------------------------------------------------------


def test_plugin_implements_the_contract() -> None:
    assert isinstance(plugin, Plugin)
    assert plugin.name == "etcd"


def test_discover_counts_keys_and_size(etcd_source: EtcdServer) -> None:
    inv = plugin.discover(settings_of(etcd_source))
    assert inv.counts["keys"] == etcdctl_key_count(settings_of(etcd_source))
    assert inv.counts["members"] == 1
    assert inv.bytes > 0 and inv.details["version"].startswith("3.")


def etcdctl_key_count(settings: Mapping[str, Any]) -> int:
    rev = int(gateway(settings, "/v3/maintenance/status", {})["header"]["revision"])
    return len(etcdctl_dump(settings, rev))


def test_settings_fall_back_to_the_lab_environment(etcd_source: EtcdServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in etcd_source.env().items():
        monkeypatch.setenv(key, value)
    assert plugin.discover({}).details["endpoint"] == etcd_source.client_url


def test_backup_streams_one_snapshot_artifact_with_facts(etcd_source: EtcdServer, repo: Repository) -> None:
    manifest = backup(repo, settings_of(etcd_source))
    (artifact,) = manifest.artifacts_of("etcd")
    meta = manifest.plugins["etcd"].meta
    assert artifact.name == "snapshot.db" and artifact.sensitive
    assert artifact.size == meta["db_size"] + 32
    assert meta["revision_exact"] and meta["revision"] == int(
        gateway(settings_of(etcd_source), "/v3/maintenance/status", {})["header"]["revision"]
    )
    assert meta["etcd_version"].startswith("3.") and meta["cluster_id"] and meta["member_id"]
    assert meta["endpoint"] == etcd_source.client_url
    assert meta["keys"] == etcdctl_key_count(settings_of(etcd_source))
    assert manifest.failure_domain["etcd_hosts"] == ["127.0.0.1"]
    assert etcd_source.client_url in manifest.failure_domain["etcd_endpoints"]
    ctx = PluginRestoreContext(repo, manifest, "etcd")
    with ctx.open("snapshot.db") as src:
        data = src.read()
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    assert hashlib.sha256(data[:-32]).hexdigest() == meta["sha256"]


# --- restore and verify ---------------------------------------------------------------------------


def test_restore_into_new_member_equals_source_at_snapshot_revision(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list
) -> None:
    source = settings_of(etcd_source)
    manifest = backup(repo, source)
    revision = manifest.plugins["etcd"].meta["revision"]
    gateway(source, "/v3/kv/put", {"key": "L2FmdGVyL2JhY2t1cA==", "value": "eA=="})  # the source moves on
    ctx = PluginRestoreContext(repo, manifest, "etcd")
    target = target_for(tmp_path, lab_root, compare_with=source)
    result = plugin.restore(ctx, target, {})
    stop_restored.append(result.details)
    assert result.changed
    assert result.details["snapshot"]["revision"] == revision == result.details["restored_revision"]
    restored = EtcdServer.from_state(dict(result.details["server"]))
    assert restored.data_dir == Path(target["data_dir"]) and restored.healthy()
    # independent of the plugin: etcdctl (gRPC) reads every key of both clusters at the snapshot revision
    assert etcdctl_dump(settings_of(restored), revision) == etcdctl_dump(source, revision)
    members = gateway(settings_of(restored), "/v3/cluster/member/list", {})["members"]
    assert [m["name"] for m in members] == ["rebuilt-0"]
    checks = plugin.verify(ctx, target, {})
    assert not failed(checks), failed(checks)
    names = {c.name for c in checks}
    assert {
        "etcd healthy",
        "revision equals the snapshot's",
        "new cluster identity",
        "hashkv",
        "every key equals the source's",
        "key count equals the backup's",
    } <= names


def test_second_restore_is_a_no_op(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list
) -> None:
    ctx = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    target = target_for(tmp_path, lab_root)
    first = plugin.restore(ctx, target, {})
    stop_restored.append(first.details)
    member = Path(target["data_dir"]) / "member"
    inode = member.stat().st_ino  # the running etcd writes its db, so compare identity, not mtimes
    second = plugin.restore(ctx, target, {})
    assert first.changed and not second.changed
    assert second.details["server"]["pid"] == first.details["server"]["pid"]
    assert second.details["restored_at"] == first.details["restored_at"]
    assert member.stat().st_ino == inode


def test_restore_restarts_a_stopped_member_without_touching_its_data(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list
) -> None:
    ctx = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    target = target_for(tmp_path, lab_root)
    first = plugin.restore(ctx, target, {})
    EtcdServer.from_state(dict(first.details["server"])).stop()
    again = plugin.restore(ctx, target, {})
    stop_restored.append(again.details)
    assert again.changed and "started" in again.summary
    assert not failed(plugin.verify(ctx, target, {}))


def test_restore_refuses_a_non_empty_data_dir(etcd_source: EtcdServer, repo: Repository, tmp_path: Path) -> None:
    ctx = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    data_dir = tmp_path / "host" / "occupied"
    data_dir.mkdir(parents=True)
    (data_dir / "precious").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        plugin.restore(ctx, {"data_dir": str(data_dir)}, {})
    assert os.listdir(data_dir) == ["precious"] and (data_dir / "precious").read_text() == "keep me"
    assert os.listdir(data_dir.parent) == ["occupied"]  # no staging file, no marker


def test_restore_refuses_a_data_dir_holding_another_backup(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path
) -> None:
    first = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    second = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    target = {"data_dir": str(tmp_path / "data")}
    assert plugin.restore(first, target, {}).changed
    with pytest.raises(UsageError, match=f"holds backup {first.backup_id}"):
        plugin.restore(second, target, {})


def test_restore_into_an_existing_empty_dir(etcd_source: EtcdServer, repo: Repository, tmp_path: Path) -> None:
    """An empty data dir may be a mount point: the data is moved in, the dir itself is not replaced."""
    ctx = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    data_dir = tmp_path / "mounted"
    data_dir.mkdir()
    inode = data_dir.stat().st_ino
    result = plugin.restore(ctx, {"data_dir": str(data_dir), "peer_url": "http://10.0.0.5:2380"}, {})
    assert result.changed and result.details["peer_url"] == "http://10.0.0.5:2380"
    assert data_dir.stat().st_ino == inode and os.listdir(data_dir) == ["member"]
    assert (tmp_path / f"mounted{MARKER_SUFFIX}").exists()


def test_bump_revision_is_detected_and_recorded(etcd_source: EtcdServer, repo: Repository, tmp_path: Path) -> None:
    ctx = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    supported = bump_supported(etcd_binary("etcdutl"))
    result = plugin.restore(ctx, {"data_dir": str(tmp_path / "a")}, {})
    bump = result.details["bump_revision"]
    assert bump["applied"] is supported and bump["requested"] == 1_000_000_000
    if supported:
        assert result.details["restored_revision"] == result.details["snapshot"]["revision"] + 1_000_000_000
        return
    assert "--bump-revision" in bump["reason"]
    with pytest.raises(UsageError, match="cannot bump"):
        plugin.restore(ctx, {"data_dir": str(tmp_path / "b")}, {"require_bump_revision": True})
    assert not (tmp_path / "b").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(SCRATCH_PREFIX)]


def test_verify_notices_a_target_that_differs(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list
) -> None:
    source = settings_of(etcd_source)
    ctx = PluginRestoreContext(repo, backup(repo, source), "etcd")
    target = target_for(tmp_path, lab_root, compare_with=source)
    result = plugin.restore(ctx, target, {})
    stop_restored.append(result.details)
    restored = settings_of(EtcdServer.from_state(dict(result.details["server"])))
    gateway(restored, "/v3/kv/put", {"key": "L3JlZ2lzdHJ5L3NlY3JldHMvbnMtMS9vYmotMDAwMDE=", "value": "eA=="})
    bad = {c.name: c for c in failed(plugin.verify(ctx, target, {}))}
    assert "revision equals the snapshot's" in bad
    # the comparison reads the target at the restored revision: still equal there
    assert "every key equals the source's" not in bad


def test_dependencies_name_the_store_the_new_member_and_nothing_of_the_old_cluster(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path
) -> None:
    manifest = backup(repo, settings_of(etcd_source))
    ctx = PluginRestoreContext(repo, manifest, "etcd")
    target = {"data_dir": str(tmp_path / "d"), "peer_url": "http://10.1.2.3:2380", "client_url": "http://10.1.2.3:2379"}
    deps = restore_dependencies(repo, plugin, manifest, target)
    addresses = {(d.kind, d.address) for d in deps}
    assert ("reference", "http://10.1.2.3:2380") in addresses
    assert ("endpoint", "http://10.1.2.3:2379") in addresses
    assert ("endpoint", repo.backend.url) in addresses  # added by the core for every plugin
    assert any(d.kind == "credential" and "passphrase" in d.address for d in deps)
    assert not any(etcd_source.client_url in d.address for d in deps)
    with_source = plugin.dependencies(ctx, {**target, "compare_with": settings_of(etcd_source)})
    assert any(d.address == etcd_source.client_url and "optional" in d.purpose for d in with_source)


# --- TLS ------------------------------------------------------------------------------------------


def test_tls_round_trip(
    etcd_tls_source: EtcdServer, repo: Repository, tmp_path: Path, lab_root: Path, stop_restored: list
) -> None:
    source = settings_of(etcd_tls_source)
    assert source["endpoints"].startswith("https://") and source["cert"]
    manifest = backup(repo, source)
    ctx = PluginRestoreContext(repo, manifest, "etcd")
    target = target_for(tmp_path, lab_root, tls=True, compare_with=source)
    result = plugin.restore(ctx, target, {})
    stop_restored.append(result.details)
    assert result.details["client"]["endpoints"][0].startswith("https://")
    checks = plugin.verify(ctx, target, {})
    assert not failed(checks), failed(checks)
    revision = manifest.plugins["etcd"].meta["revision"]
    restored = settings_of(EtcdServer.from_state(dict(result.details["server"])))
    assert etcdctl_dump(restored, revision) == etcdctl_dump(source, revision)


def test_tls_without_client_certificate_is_a_clear_source_error(etcd_tls_source: EtcdServer, repo: Repository) -> None:
    source = {"endpoints": etcd_tls_source.client_url, "cacert": etcd_tls_source.tls_ca}
    with BackupSession(repo) as session, pytest.raises(SourceError) as err:
        plugin.backup(source, session.context_for("etcd"))
    assert "TLS" in err.value.message and etcd_tls_source.client_url in err.value.message
    assert "ETCD_CERT" in (err.value.hint or "")


def test_tls_with_the_wrong_ca_is_a_clear_source_error(etcd_tls_source: EtcdServer, etcd_source: EtcdServer) -> None:
    wrong = {**settings_of(etcd_tls_source), "cacert": str(Path(etcd_source.dir) / "nope.crt")}
    with pytest.raises(UsageError, match="does not exist"):
        plugin.discover(wrong)
    other = EtcdServer(name="other", dir=str(Path(etcd_tls_source.dir).parent / "other-ca"), tls=True)
    other.ensure_pki()
    with pytest.raises(SourceError, match="certificate verify failed"):
        plugin.discover({**settings_of(etcd_tls_source), "cacert": other.tls_ca})


# --- failures -------------------------------------------------------------------------------------


def test_etcd_down_is_a_quick_one_line_source_error(repo: Repository) -> None:
    url = f"http://127.0.0.1:{process.free_port()}"
    started = time.monotonic()
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"endpoints": url})
        manifest = session.commit()
    assert time.monotonic() - started < 8  # refused at once, not the 10 s timeout (room for a loaded machine)
    assert outcome.status == "failed" and manifest.status == "partial" and not manifest.artifacts
    assert outcome.error == (
        f"etcd at {url} is unreachable: connection refused (check ETCD_ENDPOINTS / that etcd is running)"
    )


def test_etcd_that_never_answers_times_out(repo: Repository) -> None:
    with socket_that_never_answers() as port:
        started = time.monotonic()
        with BackupSession(repo) as session, pytest.raises(SourceError, match="unreachable: no answer"):
            plugin.backup({"endpoints": f"127.0.0.1:{port}", "timeout": 1}, session.context_for("etcd"))
        assert time.monotonic() - started < 5


@contextlib.contextmanager
def socket_that_never_answers() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) but never replies: a hung etcd."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def test_corrupted_snapshot_stream_is_an_integrity_error(
    etcd_source: EtcdServer, corrupting_proxy: CorruptingProxy, repo: Repository
) -> None:
    source = {"endpoints": f"http://127.0.0.1:{corrupting_proxy.port}"}
    with BackupSession(repo) as session:
        with pytest.raises(IntegrityError, match="does not match the SHA-256 etcd appended"):
            plugin.backup(source, session.context_for("etcd"))
        assert corrupting_proxy.corrupted.is_set()
        assert not session.artifacts  # the half-written artifact was abandoned


def test_restore_rejects_a_snapshot_whose_embedded_hash_is_wrong(
    etcd_source: EtcdServer, repo: Repository, tmp_path: Path
) -> None:
    """A snapshot damaged before it reached the store: the store's own hash is fine, etcd's is not."""
    good = PluginRestoreContext(repo, backup(repo, settings_of(etcd_source)), "etcd")
    with good.open("snapshot.db") as src:
        data = bytearray(src.read())
    data[4096] ^= 0x01
    with BackupSession(repo) as session:
        with session.context_for("etcd").artifact("snapshot.db", sensitive=True) as sink:
            sink.write(bytes(data))
        bad = PluginRestoreContext(repo, session.commit(), "etcd")
    host = tmp_path / "host"
    with pytest.raises(IntegrityError, match="SHA-256 etcd appended"):
        plugin.restore(bad, {"data_dir": str(host / "data")}, {})
    assert os.listdir(host) == []  # nothing staged or restored is left behind


@pytest.mark.parametrize("split", [1, 7, 31, 32, 33, 4096, 10**6])
def test_snapshot_digest_holds_back_the_trailer_at_any_split(split: int) -> None:
    db = noise(50_000)
    stream = db + hashlib.sha256(db).digest()
    digest = SnapshotDigest()
    for i in range(0, len(stream), split):
        digest.update(stream[i : i + split])
    assert digest.verify("test") == hashlib.sha256(db).hexdigest() and digest.db_size == len(db)
    broken = SnapshotDigest()
    broken.update(stream[:-1] + bytes([stream[-1] ^ 1]))
    with pytest.raises(IntegrityError):
        broken.verify("test")


def test_lab_pki_issues_private_keys_and_usable_certs(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from drtool.servers import pki

    ca = pki.make_ca(tmp_path / "pki", "test CA")
    assert pki.make_ca(tmp_path / "pki", "ignored").cert.read_bytes() == ca.cert.read_bytes()  # reused
    server = pki.issue(ca, tmp_path, "server", "srv", server=True)
    client = pki.issue(ca, tmp_path, "client", "me", client=True, server=False, organizations=["system:masters"])
    for files in (ca, server, client):
        assert files.key.stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate(server.cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    usage = (
        x509.load_pem_x509_certificate(client.cert.read_bytes())
        .extensions.get_extension_for_class(x509.ExtendedKeyUsage)
        .value
    )
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert.read_bytes()))
