"""Copying images by digest from their registries into a backup: whole indexes, every platform, referrers.

Artifacts are content-addressed: ``blobs/sha256/<hex>`` and ``manifests/sha256/<hex>`` hold the exact bytes
the registry served (so every digest survives the round trip), each stored once per backup however many
images share it; the chunk store's deduplication makes a blob already stored by an earlier backup cheap.

Walk: a manifest is fetched (and checked against its digest), its children (an index's manifests) and its
blobs (config and layers) are collected; with ``referrers`` on, the OCI 1.1 referrers API (or the
``sha256-<hex>`` fallback tag) is asked for each manifest's referrers, which are walked the same way.
Manifests are small and walked one by one; blobs stream in parallel (``workers``). The images plugin copies
every image this way, the helm plugin its OCI charts.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from drtool.errors import NotFound, SourceError
from drtool.plugin.contract import BackupContext

from .refs import ImageRef
from .registry import Registry, children, referrers_tag
from .settings import SourceSettings, registry_for


def blob_artifact(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/")


def manifest_artifact(digest: str) -> str:
    return "manifests/" + digest.replace(":", "/")


@dataclasses.dataclass
class Image:
    """One source image as a restore needs it, in push order."""

    ref: str
    host: str
    repository: str
    digest: str
    media_type: str
    tags: dict[str, str] = dataclasses.field(default_factory=dict)  # tag -> digest (incl. referrers tags)
    manifests: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (digest, media type)
    blobs: list[str] = dataclasses.field(default_factory=list)
    referrers: list[str] = dataclasses.field(default_factory=list)
    used_by: list[str] = dataclasses.field(default_factory=list)
    platforms: list[str] = dataclasses.field(default_factory=list)


class Copier:
    """Copies into one backup; remembers what it stored so shared manifests and blobs go in once."""

    def __init__(self, ctx: BackupContext, settings: SourceSettings) -> None:
        self.ctx, self.settings = ctx, settings
        self.registries: dict[str, Registry] = {}
        self.manifests: set[str] = set()
        self.blobs: dict[str, tuple[str, str, int]] = {}  # digest -> (host, repository, size) to fetch from
        self.lock = threading.Lock()

    def registry(self, host: str) -> Registry:
        if host not in self.registries:
            self.registries[host] = registry_for(self.settings, host)
        return self.registries[host]

    def image(self, ref: ImageRef, used_by: list[str]) -> Image:
        reg = self.registry(ref.api_host)
        try:
            data, media_type, digest = reg.manifest(ref.repository, ref.reference)
        except NotFound:
            raise SourceError(f"image {ref} not found in its registry", "is the reference right?") from None
        img = Image(str(ref), ref.host, ref.repository, digest, media_type, used_by=used_by)
        if ref.tag:
            img.tags[ref.tag] = digest
        self._walk(reg, img, data, media_type, digest)
        return img

    def _walk(self, reg: Registry, img: Image, data: bytes, media_type: str, digest: str) -> None:
        body = json.loads(data)
        kids, blobs = children(body, media_type)
        for kid in kids:
            kid_data, kid_type, kid_digest = reg.manifest(img.repository, kid["digest"])
            self._walk(reg, img, kid_data, kid_type or kid.get("mediaType", ""), kid_digest)
            if kid.get("platform"):
                p = kid["platform"]
                img.platforms.append("/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x))
        for blob in blobs:
            img.blobs.append(blob["digest"])
            with self.lock:
                self.blobs.setdefault(blob["digest"], (reg.host, img.repository, int(blob.get("size") or 0)))
        self._store_manifest(digest, media_type, data)
        if (digest, media_type) not in img.manifests:
            img.manifests.append((digest, media_type))
        if self.settings.referrers:
            self._referrers(reg, img, digest)

    def _referrers(self, reg: Registry, img: Image, subject: str) -> None:
        found = reg.referrers(img.repository, subject)
        for desc in found:
            if desc["digest"] in img.referrers or desc["digest"] == img.digest:
                continue
            data, media_type, digest = reg.manifest(img.repository, desc["digest"])
            img.referrers.append(digest)
            self._walk(reg, img, data, media_type or desc.get("mediaType", ""), digest)
        if not found:
            return
        tag = referrers_tag(subject)  # the fallback tag's own index: clients of the target find referrers so too
        try:
            data, media_type, digest = reg.manifest(img.repository, tag)
        except NotFound:
            return  # the registry has the referrers API and no fallback tag
        self._store_manifest(digest, media_type, data)
        if (digest, media_type) not in img.manifests:
            img.manifests.append((digest, media_type))
        img.tags[tag] = digest

    def _store_manifest(self, digest: str, media_type: str, data: bytes) -> None:
        if digest in self.manifests:
            return
        meta = {"digest": digest, "media_type": media_type, "size": len(data)}
        with self.ctx.artifact(manifest_artifact(digest), meta=meta) as sink:
            sink.write(data)
        self.manifests.add(digest)

    def copy_blobs(self) -> int:
        """Stream every collected blob into its artifact, ``workers`` at a time; returns the bytes copied."""
        total = sum(size for _, _, size in self.blobs.values())
        progress = self.ctx.progress("blobs", total)

        def one(digest: str, host: str, repository: str) -> int:
            n = 0
            meta = {"digest": digest, "size": self.blobs[digest][2]}
            reg = self.registry(host)
            with self.ctx.artifact(blob_artifact(digest), meta=meta) as sink:
                for chunk in reg.blob(repository, digest, check=False):  # the sink hashes every byte
                    sink.write(chunk)
                    n += len(chunk)
                    progress.advance(len(chunk))
            # a mismatch fails the plugin, whose artifacts are then dropped (BackupSession.run_plugin)
            reg.check_blob(repository, digest, f"sha256:{sink.sha256}")
            return n

        with ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="drtool-images") as pool:
            futures = [pool.submit(one, d, h, r) for d, (h, r, _) in sorted(self.blobs.items())]
            return sum(f.result() for f in futures)
