"""Registry settings (source and target) of the plugins that copy OCI content: images, helm charts.

Lists accept YAML lists or comma-separated strings, maps a mapping or ``"a=b,c=d"``, as every plugin's
settings do (``-t``/``-o KEY=VALUE`` on the command line are strings).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_bool, as_list, as_number

from .registry import Registry


def parse_map(value: Any, name: str) -> dict[str, str]:
    """``{src: dst}`` or ``"src=dst,src2=dst2"``."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    out = {}
    for item in as_list(value):
        src, sep, dst = item.partition("=")
        if not sep or not src.strip() or not dst.strip():
            raise UsageError(f"bad {name} entry {item!r}", "use source-host=target-host[,...]")
        out[src.strip()] = dst.strip()
    return out


Credentials = dict[str, tuple[str, str]]


def parse_credentials(value: Any) -> Credentials:
    """``credentials``: registry host -> user and the NAME of an environment variable holding the password,
    as ``{host: {username: u, password_env: VAR}}`` or ``"host=u:VAR,..."``. Passwords never sit in a config
    file or on a command line; a variable that is not set is a usage error naming the variable, not its value."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        pairs = [
            (str(h), str((v or {}).get("username", "")), str((v or {}).get("password_env", "")))
            for h, v in value.items()
        ]
    else:
        pairs = []
        for item in as_list(value):
            host, _, rest = item.partition("=")
            user, _, env = rest.partition(":")
            pairs.append((host.strip(), user.strip(), env.strip()))
    out: Credentials = {}
    for host, user, env in pairs:
        if not host or not user or not env:
            raise UsageError(
                "bad registry credentials entry", "use {HOST: {username: U, password_env: VAR}} or HOST=U:VAR"
            )
        if env not in os.environ:
            raise UsageError(
                f"registry credentials for {host}: ${env} is not set", "export the password in that variable"
            )
        out[host] = (user, os.environ[env])
    return out


def plain_http_for(value: Any) -> bool | tuple[str, ...] | None:
    """``plain_http``: true/false for every registry, or a list of hosts; unset: loopback hosts only."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or str(value).lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return as_bool(value, False)
    return tuple(as_list(value))


def resolve_plain_http(setting: bool | tuple[str, ...] | None, host: str) -> bool | None:
    if isinstance(setting, tuple):
        return True if host in setting else None
    return setting


def registry_for(settings: SourceSettings | TargetSettings, host: str) -> Registry:
    """A client for ``host`` with the plain-HTTP choice and the credentials ``settings`` give it."""
    return Registry(host, resolve_plain_http(settings.plain_http, host), settings.credentials.get(host))


@dataclasses.dataclass(frozen=True)
class SourceSettings:
    """``images``: explicit references; ``kubeconfig``/``context``: a cluster whose workloads are scanned
    (``scan_workloads``, default true when a kubeconfig is given); ``registries``: host globs to copy from
    (default every host); ``referrers`` (true): copy signatures, SBOMs and other referrers too."""

    images: tuple[str, ...] = ()
    scan_workloads: bool = False
    registries: tuple[str, ...] = ()
    referrers: bool = True
    plain_http: bool | tuple[str, ...] | None = None
    workers: int = 4
    credentials: Credentials = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> SourceSettings:
        return cls(
            images=tuple(as_list(m.get("images"))),
            scan_workloads=as_bool(m.get("scan_workloads"), bool(m.get("kubeconfig"))),
            registries=tuple(as_list(m.get("registries"))),
            referrers=as_bool(m.get("referrers"), True),
            plain_http=plain_http_for(m.get("plain_http")),
            workers=max(1, int(as_number(m.get("workers"), 4, "workers"))),
            credentials=parse_credentials(m.get("credentials")),
        )

    def wants(self, host: str) -> bool:
        return not self.registries or any(fnmatch.fnmatchcase(host, p) for p in self.registries)


@dataclasses.dataclass(frozen=True)
class TargetSettings:
    """``registry_map``: source host -> target host; ``registry``: the target for every unmapped host."""

    registry_map: Mapping[str, str]
    registry: str | None = None
    plain_http: bool | tuple[str, ...] | None = None
    workers: int = 4
    dry_run: bool = False  # look, count what would be pushed, write nothing
    credentials: Credentials = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> TargetSettings:
        merged = {**target, **options}
        return cls(
            registry_map=parse_map(merged.get("registry_map"), "registry_map"),
            registry=str(merged["registry"]) if merged.get("registry") else None,
            plain_http=plain_http_for(merged.get("plain_http")),
            workers=max(1, int(as_number(merged.get("workers"), 4, "workers"))),
            dry_run=as_bool(merged.get("dry_run"), False),
            credentials=parse_credentials(merged.get("credentials")),
        )

    def host_for(self, source_host: str) -> str:
        host = self.registry_map.get(source_host) or self.registry
        if not host:
            raise UsageError(
                f"no target registry for images from {source_host}",
                "set registry=HOST (every image) or registry_map=SOURCE=TARGET in the restore target",
            )
        return host
