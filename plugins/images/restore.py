"""Push a backup's images into the target registries (``drtool.plugin.toolkit.oci.push``), then read them
back by digest."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.plugin.contract import Check, Dependency, RestoreContext, RestoreResult
from drtool.plugin.toolkit.oci.pull import Image
from drtool.plugin.toolkit.oci.push import check_images, image_from_dict, push_all
from drtool.plugin.toolkit.oci.settings import TargetSettings

from .backup import INDEX


def load_images(ctx: RestoreContext) -> list[Image]:
    with ctx.open(INDEX) as src:
        return [image_from_dict(raw) for raw in json.loads(src.read())["images"]]


def run_restore(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
    settings = TargetSettings.parse(target, options)
    images = load_images(ctx)
    pusher = push_all(ctx, settings, images)
    c = pusher.counts
    summary = (
        f"{len(images)} images into {', '.join(sorted(pusher.registries))}: {c.uploaded} blobs uploaded "
        f"({c.uploaded_bytes} bytes), {c.mounted} mounted, {c.present} already there; {c.manifests} manifests, "
        f"{c.tags} tags pushed"
    )
    details = dataclasses.asdict(c) | {"images": {i.ref: f"{settings.host_for(i.host)}/{i.repository}" for i in images}}
    if settings.dry_run:
        return RestoreResult(changed=False, summary=f"dry run, would push: {summary}", details=details)
    return RestoreResult(changed=c.changed(), summary=summary, details=details)


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    settings = TargetSettings.parse(target, options)
    if settings.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    return check_images(ctx, settings, load_images(ctx), "images")


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    settings = TargetSettings.parse(target, {})
    deps: dict[str, Dependency] = {}
    for img in load_images(ctx):
        try:
            host = settings.host_for(img.host)
        except DrtoolError as exc:
            host = f"(unresolved: {exc.message})"
        if host not in deps:
            purpose = "registry the images are pushed to, and restored workloads pull from"
            deps[host] = Dependency("endpoint", host, purpose, f"image {img.ref}")
    return list(deps.values())
