"""Image references (``host/repository:tag@digest``) parsed the way container runtimes resolve them.

A reference without a registry host pulls from Docker Hub (``nginx`` is ``docker.io/library/nginx:latest``);
the host rule is ``registry_host``, which the Kubernetes references (``drtool.kube.references``) use too, so
the independence analysis and the copy agree on which registry an image comes from.
"""

from __future__ import annotations

import dataclasses
import re

from drtool.errors import UsageError

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"  # where docker.io's distribution API is served


def registry_host(image: str) -> str:
    """The registry an image reference pulls from (``nginx`` -> docker.io, ``ghcr.io/a/b:1`` -> ghcr.io)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


@dataclasses.dataclass(frozen=True)
class ImageRef:
    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What a manifest request names: the digest when pinned (it wins over the tag), else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.host == DOCKER_HUB else self.host

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        at = f"@{self.digest}" if self.digest else ""
        return f"{self.host}/{self.repository}{tag}{at}"


def parse(ref: str) -> ImageRef:
    """``[host/]repo[:tag][@sha256:...]``; raises UsageError for anything else."""
    text = ref.strip()
    name, _, digest = text.partition("@")
    if digest and not DIGEST.match(digest):
        raise UsageError(f"image reference {ref!r} has a malformed digest", "digests look like sha256:<64 hex>")
    host = registry_host(name)
    path = name[len(host) + 1 :] if name.startswith(f"{host}/") else name
    repo, tag = path, None
    slash = path.rfind("/")
    if ":" in path[slash + 1 :]:
        repo, _, tag = path.rpartition(":")
    if host == DOCKER_HUB and "/" not in repo:
        repo = f"library/{repo}"
    if not repo or not re.fullmatch(r"[a-z0-9]+(?:[._/-]+[a-z0-9]+)*", repo):
        raise UsageError(f"image reference {ref!r} has an invalid repository name", "use host/repo[:tag][@digest]")
    if tag is None and not digest:
        tag = "latest"
    return ImageRef(host, repo, tag, digest or None)
