"""The images plugin against two real registries (distribution v3, the lab's Go build) on loopback.

The source holds images the tests built themselves (``drtool_plugins.images.sample``): multi-platform
indexes (3 platforms, a base layer shared by every platform and image), a model as an OCI artifact, and a
signature-like referrer listed under the ``sha256-<hex>`` fallback tag. Read-back of a restore goes over
plain HTTP with ``requests`` here, not through the plugin's own client, so a client bug cannot hide itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import requests
from drtool_plugins.images import ImagesPlugin, sample

from drtool.errors import IntegrityError, SourceError, UsageError
from drtool.plugin.toolkit.oci.registry import ACCEPT
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures import stores
from tests.fixtures.kube import lab_name
from tests.fixtures.registry import RegistryLab, start_registry

plugin = ImagesPlugin()


def backup(repo: Repository, source: dict[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, source)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def get_manifest(host: str, repo: str, ref: str) -> tuple[dict[str, Any], str]:
    resp = requests.get(f"http://{host}/v2/{repo}/manifests/{ref}", headers={"Accept": ACCEPT}, timeout=10)
    assert resp.status_code == 200, (repo, ref, resp.status_code)
    return resp.json(), "sha256:" + hashlib.sha256(resp.content).hexdigest()


def get_blob(host: str, repo: str, digest: str) -> bytes:
    resp = requests.get(f"http://{host}/v2/{repo}/blobs/{digest}", timeout=10)
    assert resp.status_code == 200, (repo, digest)
    return resp.content


def all_refs(reg: RegistryLab) -> list[str]:
    return [reg.ref(k) for k, p in reg.pushed.items() if p.tag]


def test_round_trip_every_platform_artifact_and_referrer(
    repo: Repository, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    src, dst = registry_source, registry_target
    manifest = backup(repo, {"images": all_refs(src)})
    meta = manifest.plugins["images"].meta
    assert meta["images"] == 3 and meta["skipped"] == {}

    names = [a.name for a in manifest.artifacts_of("images")]
    blobs = [n for n in names if n.startswith("blobs/")]
    assert len(blobs) == len(set(blobs)) == meta["blobs"]
    # shared layers are stored once: the base layer is in 2 images x 3 platforms, the empty config twice
    trainer_index, _ = get_manifest(src.host, "ai/trainer", "2.1")
    base = get_manifest(src.host, "ai/trainer", trainer_index["manifests"][0]["digest"])[0]["layers"][0]["digest"]
    assert names.count("blobs/" + base.replace(":", "/")) == 1

    outcome = run_restore(repo, manifest, plugin, {"registry": dst.host})
    assert outcome.verified, outcome.checks
    assert outcome.result.changed
    # the base layer and the empty config are in several repositories: pushed once, then mounted
    assert outcome.result.details["mounted"] >= 2, outcome.result.details
    # as the target's own access log saw it: each distinct blob's bytes sent once (one streamed PATCH), the
    # repositories that share it got a mount
    assert dst.requests("PATCH") == outcome.result.details["uploaded"] == len(set(blobs))
    uploads_opened = dst.requests("POST")

    for key in ("app0", "trainer", "model"):
        p = src.pushed[key]
        _, digest = get_manifest(dst.host, p.repository, p.tag)
        assert digest == p.digest, key  # the same bytes: digests unchanged
    index, _ = get_manifest(dst.host, "ai/trainer", "2.1")
    platforms = {(m["platform"]["architecture"], m["platform"].get("variant")) for m in index["manifests"]}
    assert platforms == {("amd64", None), ("arm64", None), ("arm", "v7")}
    for child in index["manifests"]:
        image, digest = get_manifest(dst.host, "ai/trainer", child["digest"])
        assert digest == child["digest"]
        for layer in image["layers"]:
            data = get_blob(dst.host, "ai/trainer", layer["digest"])
            assert "sha256:" + hashlib.sha256(data).hexdigest() == layer["digest"]
    # the referrer (signature) and its fallback tag came along
    sig = src.pushed["signature"]
    listed, _ = get_manifest(dst.host, "ai/trainer", src.pushed["trainer"].digest.replace(":", "-"))
    assert [m["digest"] for m in listed["manifests"]] == [sig.digest]
    sig_body, sig_digest = get_manifest(dst.host, "ai/trainer", sig.digest)
    assert sig_digest == sig.digest and sig_body["subject"]["digest"] == src.pushed["trainer"].digest
    # the OCI artifact keeps its artifactType and payload
    model, _ = get_manifest(dst.host, "ai/models/llm", "v3")
    assert model["artifactType"] == "application/vnd.drtool.model.v1"
    assert (
        get_blob(dst.host, "ai/models/llm", model["layers"][0]["digest"]) == hashlib.sha256(b"weights").digest() * 512
    )

    again = run_restore(repo, manifest, plugin, {"registry": dst.host})
    assert again.verified and not again.result.changed, again.result.summary
    # every blob already there: the registry saw no upload opened (nor mount) and no byte sent again
    assert (dst.requests("POST"), dst.requests("PATCH")) == (uploads_opened, outcome.result.details["uploaded"])


def test_verify_fails_when_target_lost_a_manifest(
    repo: Repository, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    src, dst = registry_source, registry_target
    manifest = backup(repo, {"images": [src.ref("model")]})
    assert run_restore(repo, manifest, plugin, {"registry": dst.host}).verified
    digest = src.pushed["model"].digest
    resp = requests.delete(f"http://{dst.host}/v2/ai/models/llm/manifests/{digest}", timeout=10)
    assert resp.status_code == 202
    ctx = PluginRestoreContext(repo, manifest, "images")
    checks = plugin.verify(ctx, {"registry": dst.host}, {})
    assert not checks[0].ok and "missing" in checks[0].detail


def test_registry_map_and_unmapped_host(
    repo: Repository, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    src, dst = registry_source, registry_target
    manifest = backup(repo, {"images": [src.ref("app0")]})
    with pytest.raises(UsageError, match="no target registry"):
        run_restore(repo, manifest, plugin, {"registry_map": "elsewhere.example=x.example"})
    assert requests.get(f"http://{dst.host}/v2/_catalog", timeout=10).json()["repositories"] == []
    outcome = run_restore(repo, manifest, plugin, {"registry_map": f"{src.host}={dst.host}"})
    assert outcome.verified
    deps = plugin.dependencies(
        PluginRestoreContext(repo, manifest, "images"), {"registry_map": f"{src.host}={dst.host}"}
    )
    assert [d.address for d in deps] == [dst.host]


def test_registry_with_authentication(
    repo: Repository,
    registry_source: RegistryLab,
    lab_root: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A target that wants a password (htpasswd): refused cleanly without one, verified with one."""
    dst = start_registry(lab_root, lab_name("regauth", request), auth=True)
    try:
        manifest = backup(repo, {"images": [registry_source.ref("model")]})
        with pytest.raises(SourceError, match="401") as refused:
            run_restore(repo, manifest, plugin, {"registry": dst.host})
        assert dst.server.password not in str(refused.value)
        monkeypatch.setenv("LAB_REGISTRY_PASSWORD", dst.server.password)
        target = {"registry": dst.host, "credentials": f"{dst.host}={dst.server.username}:LAB_REGISTRY_PASSWORD"}
        outcome = run_restore(repo, manifest, plugin, target)
        assert outcome.verified, outcome.checks
        anonymous = requests.get(f"http://{dst.host}/v2/ai/models/llm/manifests/v3", timeout=10)
        assert anonymous.status_code == 401
        authed = requests.get(
            f"http://{dst.host}/v2/ai/models/llm/manifests/v3",
            headers={"Accept": ACCEPT},
            auth=(dst.server.username, dst.server.password),
            timeout=10,
        )
        assert "sha256:" + hashlib.sha256(authed.content).hexdigest() == registry_source.pushed["model"].digest
        monkeypatch.delenv("LAB_REGISTRY_PASSWORD")
        with pytest.raises(UsageError, match=r"\$LAB_REGISTRY_PASSWORD is not set"):
            run_restore(repo, manifest, plugin, target)
    finally:
        dst.lab.down()


def test_damaged_backup_leaves_no_image_visible(
    repo: Repository, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    """A chunk of the LAST image's last layer flipped in the store: the restore fails before any manifest."""
    src, dst = registry_source, registry_target
    manifest = backup(repo, {"images": all_refs(src)})
    index, _ = get_manifest(src.host, "platform/app0", "v1")
    layer = get_manifest(src.host, "platform/app0", index["manifests"][-1]["digest"])[0]["layers"][-1]["digest"]
    entry = next(a for a in manifest.artifacts_of("images") if a.name == "blobs/" + layer.replace(":", "/"))
    stores.flip_byte(repo, entry.chunks[0][0])
    with pytest.raises(IntegrityError):
        run_restore(repo, manifest, plugin, {"registry": dst.host})
    for key in ("app0", "trainer", "model"):
        p = src.pushed[key]
        resp = requests.get(f"http://{dst.host}/v2/{p.repository}/manifests/{p.tag}", timeout=10)
        assert resp.status_code == 404, key  # blobs of other images may be there, no image is


def test_missing_image_fails_the_backup_cleanly(repo: Repository, registry_source: RegistryLab) -> None:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"images": [f"{registry_source.host}/no/such:1"]})
    assert outcome.status == "failed" and "not found" in outcome.error


def test_registries_filter_skips_unreachable_hosts(repo: Repository, registry_source: RegistryLab) -> None:
    source = {"images": [registry_source.ref("model"), "nginx:1.27", "ghcr.io/x/y:1"], "registries": "127.0.0.1:*"}
    inventory = plugin.discover(source)
    assert inventory.counts == {"images": 3}
    assert inventory.details["registries"] == {registry_source.host: 1, "docker.io": 1, "ghcr.io": 1}
    manifest = backup(repo, source)
    meta = manifest.plugins["images"].meta
    assert meta["images"] == 1
    assert set(meta["skipped"]) == {"nginx:1.27", "ghcr.io/x/y:1"}
    index = json.loads(next(iter(_read(repo, manifest, "images.json"))))
    assert index["images"][0]["digest"] == registry_source.pushed["model"].digest


def _read(repo: Repository, manifest: Manifest, name: str) -> list[bytes]:
    with PluginRestoreContext(repo, manifest, "images").open(name) as src:
        return [src.read()]


def test_source_blob_with_other_bytes_fails_the_backup(repo: Repository, registry_target: RegistryLab) -> None:
    """A registry serving a layer whose bytes do not hash to the digest its manifest names (its storage
    altered behind its back: distribution does not re-hash on read) fails the plugin with one line naming
    the blob, and the backup records none of the plugin's artifacts. The check is the store artifact's own
    SHA-256 against the digest (``pull.Copier.copy_blobs``: every byte is hashed once, not twice)."""
    src = registry_target  # a fresh registry of this test's own: its storage may be altered
    sample.push_artifact(src.client(), "ai/models/bad", "v1", b"weights " * 4096)
    layer = get_manifest(src.host, "ai/models/bad", "v1")[0]["layers"][0]["digest"]
    hexdigest = layer.split(":")[1]
    data = next((src.server.path / "storage").rglob(f"blobs/sha256/{hexdigest[:2]}/{hexdigest}/data"))
    altered = bytearray(data.read_bytes())
    altered[len(altered) // 2] ^= 0x01
    data.write_bytes(bytes(altered))
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"images": [f"{src.host}/ai/models/bad:v1"]})
        assert outcome.status == "failed"
        expected = f"registry {src.host}: blob ai/models/bad@{layer} arrived with a different digest"
        assert outcome.error == expected, outcome.error
        assert session.artifacts == []
