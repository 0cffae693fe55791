"""Realistic registry content built here, without the internet: a multi-platform image, an OCI artifact and
a signature-like referrer, pushed over the distribution API.

Used by the lab (``ImagesLab.seed``), the tests and the benchmark. The image is a real OCI image: gzip'd tar
layers (one base layer shared by every platform, one per platform), a config per platform whose
``rootfs.diff_ids`` are the uncompressed layers' digests, a manifest per platform and an index with three
platforms. The referrer follows OCI 1.1: a manifest with ``subject`` and ``artifactType``, listed under the
``sha256-<hex>`` fallback tag for registries without the referrers API (distribution 2.8).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
from typing import Any

from drtool.plugin.toolkit.oci.registry import OCI_INDEX, OCI_MANIFEST, Registry, referrers_tag, sha256_digest

PLATFORMS = ("linux/amd64", "linux/arm64", "linux/arm/v7")
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG = "application/vnd.oci.image.config.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
SIGNATURE = "application/vnd.dev.cosign.artifact.sig.v1+json"
MODEL = "application/vnd.drtool.model.v1"


@dataclasses.dataclass(frozen=True)
class Pushed:
    repository: str
    tag: str
    digest: str
    media_type: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def tar_layer(files: dict[str, bytes]) -> tuple[bytes, str]:
    """(gzip'd tar, diff_id: digest of the uncompressed tar), reproducible (fixed mtimes, no gzip name)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0), sha256_digest(raw.getvalue())


def _blob(reg: Registry, repo: str, data: bytes, media_type: str) -> dict[str, Any]:
    digest = sha256_digest(data)
    if not reg.has_blob(repo, digest):
        reg.push_blob(repo, digest, [data])
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _manifest(reg: Registry, repo: str, body: dict[str, Any], reference: str | None = None) -> Pushed:
    data = _json(body)
    digest = sha256_digest(data)
    reg.put_manifest(repo, reference or digest, data, body["mediaType"])
    return Pushed(repo, reference or "", digest, body["mediaType"], len(data))


def push_image(reg: Registry, repo: str, tag: str, platforms: tuple[str, ...] = PLATFORMS, label: str = "") -> Pushed:
    """A multi-platform image: shared base layer + one layer per platform, index tagged ``tag``."""
    base, base_diff = tar_layer({"etc/os-release": b"NAME=drtool-lab\n"})
    base_desc = _blob(reg, repo, base, LAYER)
    entries = []
    for platform in platforms:
        os_, arch, *variant = platform.split("/")
        layer, diff = tar_layer({"app/platform.txt": f"{platform} {label}\n".encode()})
        config: dict[str, Any] = {
            "architecture": arch,
            "os": os_,
            "config": {"Cmd": ["/app/run"], "Labels": {"org.drtool.lab": label or repo}},
            "rootfs": {"type": "layers", "diff_ids": [base_diff, diff]},
        }
        if variant:
            config["variant"] = variant[0]
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": _blob(reg, repo, _json(config), CONFIG),
            "layers": [base_desc, _blob(reg, repo, layer, LAYER)],
        }
        pushed = _manifest(reg, repo, manifest)
        plat = {"os": os_, "architecture": arch} | ({"variant": variant[0]} if variant else {})
        entries.append(pushed.descriptor() | {"platform": plat})
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    return dataclasses.replace(_manifest(reg, repo, index, tag), tag=tag)


def push_artifact(reg: Registry, repo: str, tag: str, payload: bytes) -> Pushed:
    """An OCI artifact (``artifactType``, empty config, one opaque layer): how models ship in registries."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": MODEL,
        "config": _blob(reg, repo, b"{}", EMPTY),
        "layers": [_blob(reg, repo, payload, "application/vnd.drtool.model.weights.v1")],
    }
    return dataclasses.replace(_manifest(reg, repo, manifest, tag), tag=tag)


def push_referrer(reg: Registry, subject: Pushed, signature: bytes) -> Pushed:
    """A signature-like referrer of ``subject``, also listed in the subject's fallback referrers tag."""
    repo = subject.repository
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": SIGNATURE,
        "config": _blob(reg, repo, b"{}", EMPTY),
        "layers": [_blob(reg, repo, signature, "application/vnd.dev.cosign.simplesigning.v1+json")],
        "subject": subject.descriptor(),
        "annotations": {"org.opencontainers.image.created": "2026-11-29T00:00:00Z"},
    }
    pushed = _manifest(reg, repo, manifest)
    tag = referrers_tag(subject.digest)
    listed = reg.manifest_digest(repo, tag)
    index = json.loads(reg.manifest(repo, tag)[0]) if listed else {"schemaVersion": 2, "mediaType": OCI_INDEX}
    descs = [d for d in index.get("manifests", []) if d["digest"] != pushed.digest]
    index["manifests"] = [*descs, pushed.descriptor() | {"artifactType": SIGNATURE}]
    _manifest(reg, repo, index, tag)
    return pushed


def seed_registry(reg: Registry, scale: int = 1) -> dict[str, Pushed]:
    """The lab's registry content: ``scale`` multi-platform images (one signed) and a model artifact."""
    pushed: dict[str, Pushed] = {}
    for i in range(max(1, scale)):
        pushed[f"app{i}"] = push_image(reg, f"platform/app{i}", "v1", label=f"app{i}")
    pushed["trainer"] = push_image(reg, "ai/trainer", "2.1", label="trainer")
    pushed["model"] = push_artifact(reg, "ai/models/llm", "v3", hashlib.sha256(b"weights").digest() * 512)
    claim = _json({"critical": {"image": {"docker-manifest-digest": pushed["trainer"].digest}}})
    pushed["signature"] = push_referrer(reg, pushed["trainer"], claim)
    return pushed
