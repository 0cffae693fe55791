"""Copy images by digest from their registries into the store: whole indexes, every platform, referrers.

Artifacts are content-addressed: ``blobs/sha256/<hex>`` and ``manifests/sha256/<hex>`` hold the exact bytes
the registry served (so every digest survives the round trip), each stored once per backup however many
images share it; the chunk store's deduplication makes a blob already stored by an earlier backup cheap.
``images.json``, written last, lists per image the manifests (children before parents), blobs, referrers
and tags a restore must push, in push order.

Walk: a manifest is fetched (and checked against its digest), its children (an index's manifests) and its
blobs (config and layers) are collected; with ``referrers`` on, the OCI 1.1 referrers API (or the
``sha256-<hex>`` fallback tag) is asked for each manifest's referrers, which are walked the same way.
Manifests are small and walked one by one; blobs stream in parallel (``workers``).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.errors import DrtoolError, NotFound, SourceError
from drtool.plugin.contract import BackupContext, Inventory

from . import workloads
from .oci import Registry, children, referrers_tag
from .refs import ImageRef, parse
from .settings import SourceSettings, resolve_plain_http

INDEX = "images.json"
FORMAT = "drtool-images-v1"


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
            plain = resolve_plain_http(self.settings.plain_http, host)
            self.registries[host] = Registry(host, plain, self.settings.credentials.get(host))
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
            with self.ctx.artifact(blob_artifact(digest), meta=meta) as sink:
                for chunk in self.registry(host).blob(repository, digest):
                    sink.write(chunk)
                    n += len(chunk)
                    progress.advance(len(chunk))
            return n

        with ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="drtool-images") as pool:
            futures = [pool.submit(one, d, h, r) for d, (h, r, _) in sorted(self.blobs.items())]
            return sum(f.result() for f in futures)


def wanted_images(source: Mapping[str, Any], settings: SourceSettings) -> tuple[dict[str, list[str]], str | None]:
    """Reference -> where it is used: the explicit list plus, with a kubeconfig, every workload's images."""
    found: dict[str, list[str]] = {ref: ["config"] for ref in settings.images}
    server = None
    if settings.scan_workloads:
        server, scanned = workloads.scan(source)
        for ref, users in scanned.items():
            found.setdefault(ref, []).extend(users)
    return found, server


def backup(source: Mapping[str, Any], ctx: BackupContext) -> dict[str, Any]:
    settings = SourceSettings.from_mapping(source)
    refs, server = wanted_images(source, settings)
    if not refs:
        raise SourceError("no images to back up", "list them under `images:` or give a kubeconfig to scan workloads")
    copier = Copier(ctx, settings)
    images: list[Image] = []
    skipped: dict[str, str] = {}
    parsed: dict[str, tuple[ImageRef, list[str]]] = {}
    for text, users in sorted(refs.items()):
        try:
            ref = parse(text)
        except DrtoolError as exc:
            skipped[text] = exc.message
            continue
        if not settings.wants(ref.host):
            skipped[text] = f"registry {ref.host} not in `registries`"
            continue
        parsed.setdefault(str(ref), (ref, []))[1].extend(users)
    for ref, users in parsed.values():
        images.append(copier.image(ref, users))
    copied = copier.copy_blobs()
    index = {"format": FORMAT, "images": [dataclasses.asdict(i) for i in images], "skipped": skipped}
    with ctx.artifact(INDEX, meta={"format": FORMAT, "images": len(images)}) as sink:
        sink.write(json.dumps(index, indent=1, sort_keys=True).encode())
    return {
        "images": len(images),
        "manifests": len(copier.manifests),
        "blobs": len(copier.blobs),
        "bytes": copied,
        "registries": sorted({i.host for i in images}),
        "skipped": skipped,
        "scanned_cluster": server,
    }


def discover_inventory(source: Mapping[str, Any]) -> Inventory:
    settings = SourceSettings.from_mapping(source)
    refs, server = wanted_images(source, settings)
    hosts: dict[str, int] = {}
    for text in refs:
        try:
            host = parse(text).host
        except DrtoolError:
            continue
        hosts[host] = hosts.get(host, 0) + 1
    return Inventory(counts={"images": len(refs)}, details={"registries": hosts, "scanned_cluster": server})
