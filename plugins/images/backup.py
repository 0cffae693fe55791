"""Copy images by digest from their registries into the store: whole indexes, every platform, referrers.

The copying is the toolkit's (``drtool.plugin.toolkit.oci.pull``: content-addressed blob and manifest
artifacts, referrers walked). ``images.json``, written last, lists per image the manifests (children
before parents), blobs, referrers and tags a restore must push, in push order.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from drtool.errors import DrtoolError, SourceError
from drtool.plugin.contract import BackupContext, Inventory
from drtool.plugin.toolkit.oci.pull import Copier, Image
from drtool.plugin.toolkit.oci.refs import ImageRef, parse
from drtool.plugin.toolkit.oci.settings import SourceSettings

from . import workloads

INDEX = "images.json"
FORMAT = "drtool-images-v1"


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
