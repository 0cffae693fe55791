"""Scenario ``registry-lost``: the registry the cluster's workloads pull from is wiped (a storage loss, a
cleanup job run against the wrong registry); recovered by restore-plans/registry-restore.yaml (the images
plugin pushes every image back by digest), judged by reading each workload's image back through the
registry API: its manifest by digest, and every manifest and blob it names, present.

The wipe goes through the registry API: each image the workloads name is deleted by digest, its child
manifests and blobs with it (the registry must allow deletes, as a lab's does).
"""

from __future__ import annotations

import dataclasses
import json

from drtool.errors import NotFound
from drtool.kube.client import KubeClient
from drtool.kube.readings import items
from drtool.kube.references import image_references
from drtool.plugin.toolkit.oci.refs import ImageRef, parse, registry_host
from drtool.plugin.toolkit.oci.registry import Registry, children

from .run import Judged

# where workloads name their images: controllers' pod templates and bare pods
WORKLOADS = (
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/statefulsets",
    "/apis/apps/v1/daemonsets",
    "/apis/batch/v1/jobs",
    "/apis/batch/v1/cronjobs",
    "/api/v1/pods",
)


@dataclasses.dataclass
class RegistryLost:
    host: str  # the registry wiped, ``host:port``
    scenario: str = "registry-lost"
    manual: list[str] = dataclasses.field(
        default_factory=lambda: ["ran `drtool restore --plan restore-plans/registry-restore.yaml`"]
    )
    wiped: dict[str, int] = dataclasses.field(default_factory=dict)  # manifests, blobs deleted

    def __post_init__(self) -> None:
        self.registry = Registry(self.host)

    def images(self, client: KubeClient) -> list[ImageRef]:
        """Every image the cluster's workloads pull from this registry by digest, once each, in name order."""
        refs = {ref for path in WORKLOADS for obj in items(client, path) for ref in image_references(obj)}
        return [parse(r) for r in sorted(refs) if registry_host(r) == self.host and "@" in r]

    def tree(self, repo: str, digest: str) -> tuple[list[str], list[str]]:
        """(manifests, blobs) an image names, the image itself first: everything a pull by digest reads."""
        data, media_type, _ = self.registry.manifest(repo, digest)
        nested, blobs = children(json.loads(data), media_type)
        manifests, blob_digests = [digest], [b["digest"] for b in blobs]
        for child in nested:
            more, more_blobs = self.tree(repo, child["digest"])
            manifests += more
            blob_digests += more_blobs
        return manifests, list(dict.fromkeys(blob_digests))  # a base layer shared by platforms, once

    def inject(self, client: KubeClient) -> None:
        trees = {(r.repository, r.digest): self.tree(r.repository, r.digest or "") for r in self.images(client)}
        if not trees:
            raise NotFound(f"no workload pulls from {self.host} by digest: nothing for this drill to wipe")
        for (repo, _), (manifests, blobs) in trees.items():
            for digest in manifests:
                self.registry.delete(repo, "manifests", digest)
            for digest in blobs:
                self.registry.delete(repo, "blobs", digest)
        self.wiped = {"images": len(trees), "manifests": sum(len(m) for m, _ in trees.values())}
        self.wiped["blobs"] = sum(len(b) for _, b in trees.values())

    def detected(self, client: KubeClient) -> bool:
        """No workload's image resolves any more."""
        return not any(self.registry.has_manifest(r.repository, r.digest or "") for r in self.images(client))

    def pending(self, client: KubeClient) -> str:
        left = [str(r) for r in self.images(client) if self.registry.has_manifest(r.repository, r.digest or "")]
        return f"still served by {self.host}: {', '.join(left)}"

    def judge(self, client: KubeClient) -> list[Judged]:
        """Each workload's image pulls by digest: its manifests read back (digest checked), its blobs present."""
        verdicts = []
        for ref in self.images(client):
            try:
                manifests, blobs = self.tree(ref.repository, ref.digest or "")
            except NotFound as exc:
                verdicts.append(Judged(f"pulls {ref}", False, str(exc)))
                continue
            missing = [d for d in blobs if not self.registry.has_blob(ref.repository, d)]
            detail = f"{len(manifests)} manifests, {len(blobs) - len(missing)}/{len(blobs)} blobs by digest"
            detail += f"; missing {missing[0]}" if missing else ""
            verdicts.append(Judged(f"pulls {ref}", not missing, detail))
        return verdicts
