"""Logical export and replay of KV v2 mounts: every secret, every readable version, and its metadata.

Artifact ``kv/<mount>.ndjson`` (sensitive): a header line ``{"mount", "options", "description", "config"}``,
then one line per secret ``{"path", "metadata", "versions": [{"version", "created_time", "deletion_time",
"destroyed", "data"}]}``, written as the secrets are read (one secret in memory at a time).

The KV API never returns the data of a deleted or destroyed version, so those versions are exported as
their metadata only; a replay writes an empty placeholder for them and deletes or destroys it again, so
version numbers on the target line up with the source's (the raft snapshot keeps the real contents).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import hvac
from hvac import exceptions as hvac_errors

from drtool.errors import IntegrityError, SourceError
from drtool.plugin.contract import ArtifactSink, ArtifactSource
from drtool.plugin.toolkit import paths

from .client import call

T = TypeVar("T")
R = TypeVar("R")

PREFIX = "kv/"
WORKERS = 8  # concurrent reads: a KV export or check is one small request per secret and version
META_FIELDS = ("max_versions", "cas_required", "delete_version_after", "custom_metadata")


def artifact_name(mount: str) -> str:
    return f"{PREFIX}{mount.strip('/')}.ndjson"


def kv2_mounts(client: hvac.Client) -> dict[str, dict[str, Any]]:
    """KV version 2 secret engines, ``path`` (no trailing slash) -> mount description."""
    mounts = call("listing secret engines", client.sys.list_mounted_secrets_engines)
    mounts = mounts.get("data", mounts)
    return {
        path.rstrip("/"): m
        for path, m in mounts.items()
        if isinstance(m, dict) and m.get("type") == "kv" and str((m.get("options") or {}).get("version")) == "2"
    }


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int = WORKERS) -> Iterator[R]:
    """``fn`` over ``items`` on a thread pool, results in input order, at most ``2 * workers`` in flight
    (so memory stays bounded however many secrets a mount holds)."""
    with ThreadPoolExecutor(workers, thread_name_prefix="drtool-vault") as pool:
        window: deque[Future[R]] = deque()
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


def wait_ready(client: hvac.Client, mount: str, timeout: float = 30.0) -> None:
    """A new KV v2 mount upgrades itself for a moment after being enabled and refuses requests meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.secrets.kv.v2.read_configuration(mount_point=mount)
            client.secrets.kv.v2.list_secrets(path="", mount_point=mount)
            return
        except hvac_errors.InvalidPath:
            return  # listing an empty mount: ready
        except hvac_errors.VaultError as exc:
            if time.monotonic() > deadline:
                raise SourceError(f"KV mount {mount} did not become ready: {exc}") from None
            time.sleep(0.2)


def _paths(client: hvac.Client, mount: str, folder: str = "") -> Iterator[str]:
    try:
        keys = client.secrets.kv.v2.list_secrets(path=folder, mount_point=mount)["data"]["keys"]
    except hvac_errors.InvalidPath:
        return
    except hvac_errors.VaultError as exc:
        raise SourceError(f"listing {mount}/{folder}: {exc}") from None
    for key in sorted(keys):
        if key.endswith("/"):
            yield from _paths(client, mount, folder + key)
        else:
            yield folder + key


def _secret(client: hvac.Client, mount: str, path: str) -> dict[str, Any]:
    kv = client.secrets.kv.v2
    meta = call(f"reading metadata of {mount}/{path}", kv.read_secret_metadata, path=path, mount_point=mount)["data"]
    versions = []
    for number, info in sorted(meta.get("versions", {}).items(), key=lambda kv_: int(kv_[0])):
        data = None
        if not info.get("deletion_time") and not info.get("destroyed"):
            read = call(
                f"reading {mount}/{path} version {number}",
                kv.read_secret_version,
                path=path,
                version=int(number),
                mount_point=mount,
                raise_on_deleted_version=True,
            )
            data = read["data"]["data"]
        versions.append(
            {"version": int(number), **{k: info.get(k) for k in ("created_time", "deletion_time")}}
            | {"destroyed": bool(info.get("destroyed")), "data": data}
        )
    keep = {k: meta.get(k) for k in (*META_FIELDS, "current_version", "oldest_version", "created_time")}
    return {"path": path, "metadata": keep, "versions": versions}


def export_mount(client: hvac.Client, mount: str, info: Mapping[str, Any], sink: ArtifactSink) -> int:
    """Write one KV v2 mount into ``sink``; returns the number of secrets."""
    config = call(f"reading the config of {mount}", client.secrets.kv.v2.read_configuration, mount_point=mount)
    header = {
        "mount": mount,
        "options": info.get("options") or {},
        "description": info.get("description") or "",
        "config": {k: v for k, v in (config.get("data") or {}).items() if k in META_FIELDS},
    }
    sink.write(json.dumps(header).encode() + b"\n")
    count = 0
    for secret in ordered_map(lambda path: _secret(client, mount, path), _paths(client, mount)):
        sink.write(json.dumps(secret, sort_keys=True).encode() + b"\n")
        count += 1
    return count


def read_export(src: ArtifactSource) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The header and an iterator over the secrets of one exported mount (streamed line by line)."""
    lines = _lines(src)
    try:
        header = json.loads(next(lines))
    except (StopIteration, ValueError):
        raise IntegrityError("a KV export in this backup has no header") from None
    paths.relative(header.get("mount"), "vault: KV mount")
    return header, (_checked(json.loads(line)) for line in lines)


def _checked(secret: dict[str, Any]) -> dict[str, Any]:
    """A secret whose path stays inside its mount: hvac puts it into the URL, and ``..`` there would reach
    another mount or a ``sys/`` endpoint with the restore's token."""
    paths.relative(secret.get("path"), "vault: KV path")
    return secret


def _lines(src: ArtifactSource) -> Iterator[bytes]:
    rest = b""
    for chunk in src:
        rest += bytes(chunk)
        *whole, rest = rest.split(b"\n")
        yield from (w for w in whole if w)
    if rest:
        yield rest


def latest(secret: Mapping[str, Any]) -> dict[str, Any] | None:
    """The data of the newest version that still has data (what a reader of the secret gets)."""
    current = secret["metadata"].get("current_version")
    for v in secret["versions"]:
        if v["version"] == current:
            return v["data"]
    return None


def target_secret(client: hvac.Client, mount: str, path: str) -> dict[str, Any] | None:
    """A secret as the target holds it now (same shape as the export), or None when it does not exist."""
    try:
        return _secret(client, mount, path)
    except SourceError:
        try:
            client.secrets.kv.v2.read_secret_metadata(path=path, mount_point=mount)
        except hvac_errors.InvalidPath:
            return None
        raise


def replay(client: hvac.Client, mount: str, secret: Mapping[str, Any]) -> None:
    """Write a secret that does not exist on the target: every version in order, then its metadata."""
    kv = client.secrets.kv.v2
    path = secret["path"]
    by_number = {v["version"]: v for v in secret["versions"]}
    for number in range(1, int(secret["metadata"].get("current_version") or 0) + 1):
        version = by_number.get(number)
        data = version["data"] if version and version["data"] is not None else {}
        what = f"writing {mount}/{path} version {number}"
        call(what, kv.create_or_update_secret, path=path, secret=data, cas=number - 1, mount_point=mount)
        if version is None or version["destroyed"]:
            call(what, kv.destroy_secret_versions, path=path, versions=[number], mount_point=mount)
        elif version["deletion_time"]:
            call(what, kv.delete_secret_versions, path=path, versions=[number], mount_point=mount)
    meta = {k: v for k, v in secret["metadata"].items() if k in META_FIELDS and v is not None}
    if meta:
        call(f"writing metadata of {mount}/{path}", kv.update_metadata, path=path, mount_point=mount, **meta)
