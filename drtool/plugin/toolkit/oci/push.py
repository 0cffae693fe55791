"""Pushing a backup's images into target registries, then reading them back by digest.

In an order that never shows a half-pushed image: the blobs of every image first (a HEAD says whether the
target already has it; else a cross-repository mount when this restore already pushed it to another
repository of the same registry; else a streamed upload from the store), then per image the manifests by
digest, children before their index, referrers after their subject, and tags last. The store verifies each
artifact's hash at the end of its stream and the registry checks each blob's digest before keeping it, so a
damaged backup fails before any manifest names a blob. Everything is by digest, so a rerun finds it all
present and changes nothing.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.errors import DrtoolError
from drtool.plugin.contract import Check, RestoreContext

from .pull import Image, blob_artifact, manifest_artifact
from .registry import Registry, valid_name, valid_reference
from .settings import TargetSettings, registry_for


def image_from_dict(raw: dict[str, Any]) -> Image:
    """An ``Image`` as an index artifact recorded it (JSON has lists where the dataclass has tuples)."""
    return Image(**{**raw, "manifests": [tuple(m) for m in raw["manifests"]]})


def read_manifest(ctx: RestoreContext, digest: str) -> bytes:
    with ctx.open(manifest_artifact(digest)) as src:
        return src.read()


def _stream(ctx: RestoreContext, digest: str) -> Iterator[bytes]:
    with ctx.open(blob_artifact(digest)) as src:
        yield from src


@dataclasses.dataclass
class _Counts:
    uploaded: int = 0
    uploaded_bytes: int = 0
    mounted: int = 0
    present: int = 0
    manifests: int = 0
    tags: int = 0

    def changed(self) -> bool:
        return bool(self.uploaded or self.mounted or self.manifests or self.tags)


class Pusher:
    def __init__(self, ctx: RestoreContext, settings: TargetSettings) -> None:
        self.ctx, self.settings = ctx, settings
        self.registries: dict[str, Registry] = {}
        self.sizes = {a.name: int(a.meta.get("size") or a.size) for a in ctx.artifacts}
        self.placed: dict[tuple[str, str], str] = {}  # (target host, digest) -> a repository holding it
        self.counts = _Counts()
        self.lock = threading.Lock()

    def target(self, img: Image) -> Registry:
        host = self.settings.host_for(img.host)
        if host not in self.registries:
            self.registries[host] = registry_for(self.settings, host)
        return self.registries[host]

    def blob(self, reg: Registry, repo: str, digest: str) -> None:
        if reg.has_blob(repo, digest):
            with self.lock:
                self.counts.present += 1
                self.placed.setdefault((reg.host, digest), repo)
            return
        if self.settings.dry_run:
            with self.lock:
                self.counts.uploaded += 1  # would be uploaded (or mounted)
                self.counts.uploaded_bytes += self.sizes.get(blob_artifact(digest), 0)
            return
        source_repo = self.placed.get((reg.host, digest))
        if source_repo and source_repo != repo and reg.mount_blob(repo, digest, source_repo):
            with self.lock:
                self.counts.mounted += 1
            return
        reg.push_blob(repo, digest, _stream(self.ctx, digest))
        with self.lock:
            self.counts.uploaded += 1
            self.counts.uploaded_bytes += self.sizes.get(blob_artifact(digest), 0)
            self.placed.setdefault((reg.host, digest), repo)

    def blobs(self, img: Image, pool: ThreadPoolExecutor) -> None:
        reg = self.target(img)
        for f in [pool.submit(self.blob, reg, img.repository, d) for d in dict.fromkeys(img.blobs)]:
            f.result()

    def manifests(self, img: Image) -> None:
        """Manifests by digest in the recorded order (children first), then tags."""
        reg = self.target(img)
        data = {d: read_manifest(self.ctx, d) for d, _ in img.manifests}
        for digest, media_type in img.manifests:
            if not reg.has_manifest(img.repository, digest):
                if not self.settings.dry_run:
                    reg.put_manifest(img.repository, digest, data[digest], media_type)
                self.counts.manifests += 1
        types = dict(img.manifests)
        for tag, digest in sorted(img.tags.items()):
            if reg.manifest_digest(img.repository, tag) != digest:
                if not self.settings.dry_run:
                    reg.put_manifest(img.repository, tag, data[digest], types[digest])
                self.counts.tags += 1


def push_all(ctx: RestoreContext, settings: TargetSettings, images: list[Image]) -> Pusher:
    """Push ``images``: every image has a target before anything is pushed, and every blob of every image is
    uploaded (and its digest checked by the registry) before the first manifest, so a backup damaged anywhere
    leaves no image visible, only unreferenced blobs."""
    for img in images:  # names from the backup, all checked before the first byte moves
        settings.host_for(img.host)
        valid_name(img.repository)
        for reference in [*img.tags, *img.tags.values(), *(d for d, _ in img.manifests), *img.blobs]:
            valid_reference(reference)
    pusher = Pusher(ctx, settings)
    progress = ctx.progress("images", 2 * len(images))
    with ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="drtool-images") as pool:
        for img in images:
            pusher.blobs(img, pool)
            progress.advance(1)
    for img in images:
        pusher.manifests(img)
        progress.advance(1)
    return pusher


def check_images(ctx: RestoreContext, settings: TargetSettings, images: list[Image], prefix: str) -> list[Check]:
    """Each image's manifests read back from the target by digest (digest recomputed), tags resolved, blobs present."""
    pusher = Pusher(ctx, settings)
    checks = []
    for img in images:
        name = f"{prefix}: {img.ref}"
        try:
            reg = pusher.target(img)
            problems = [f"manifest {d} missing" for d, _ in img.manifests if not _has(reg, img.repository, d)]
            problems += [
                f"tag {t} -> {reg.manifest_digest(img.repository, t)}, expected {d}"
                for t, d in sorted(img.tags.items())
                if reg.manifest_digest(img.repository, t) != d
            ]
            problems += [f"blob {d} missing" for d in dict.fromkeys(img.blobs) if not reg.has_blob(img.repository, d)]
        except DrtoolError as exc:
            checks.append(Check(name, False, exc.one_line()))
            continue
        where = f"{reg.host}/{img.repository}@{img.digest}"
        detail = "; ".join(problems[:3]) if problems else f"{where}: {len(img.manifests)} manifests by digest"
        checks.append(Check(name, not problems, detail))
    return checks


def _has(reg: Registry, repo: str, digest: str) -> bool:
    """Read back by digest: ``Registry.manifest`` recomputes the digest of what the target serves."""
    return reg.manifest_digest(repo, digest) == digest
