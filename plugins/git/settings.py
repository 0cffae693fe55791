"""The git plugin's settings: which repositories to back up, where to restore them, and how."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_bool

from .gitcmd import check_url

_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclasses.dataclass(frozen=True)
class RepoSource:
    name: str  # names the artifact ``<name>.bundle`` and fills ``{name}`` in restore targets
    url: str


def repo_name(url: str) -> str:
    """``https://host/org/platform-config.git`` -> ``platform-config``."""
    tail = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or url.rstrip("/").rsplit(":", 1)[-1]
    return _NAME.sub("-", tail.removesuffix(".git")).strip("-") or "repo"


def sources(source: Mapping[str, Any]) -> list[RepoSource]:
    """``repos``: a list of URLs or ``{name, url}`` mappings; ``url``: one repository."""
    raw = source.get("repos") or ([source["url"]] if source.get("url") else [])
    if isinstance(raw, str):
        raw = [r.strip() for r in raw.split(",") if r.strip()]
    if not raw:
        raise UsageError("the git plugin needs `repos` (or `url`) in its source settings", "e.g. repos: [URL, ...]")
    repos = []
    for item in raw:
        url = str(item["url"] if isinstance(item, Mapping) else item)
        name = str(item.get("name") or repo_name(url)) if isinstance(item, Mapping) else repo_name(url)
        repos.append(RepoSource(name, check_url(url)))
    names = [r.name for r in repos]
    if len(set(names)) != len(names):
        raise UsageError(f"two git repositories have the same name in {names}", "give each a `name`")
    return repos


@dataclasses.dataclass(frozen=True)
class RestoreTarget:
    """Exactly one of ``url`` (push into that remote) or ``path`` (create a bare repository there).

    With several repositories in a backup, the value must contain ``{name}``.
    ``repos`` restricts the restore to some of them; option ``force`` lets a push rewrite diverged branches;
    ``dry_run`` says what would be done and writes nothing.
    """

    url: str | None
    path: str | None
    only: tuple[str, ...]
    force: bool
    dry_run: bool = False

    @classmethod
    def parse(cls, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreTarget:
        url, path = target.get("url"), target.get("path")
        if bool(url) == bool(path):
            raise UsageError(
                "the git restore target needs exactly one of `url` or `path`",
                "url=REMOTE pushes into an existing (empty) remote; path=DIR creates a bare repository",
            )
        only = target.get("repos") or options.get("repos") or ()
        if isinstance(only, str):
            only = [r.strip() for r in only.split(",") if r.strip()]
        return cls(
            check_url(str(url)) if url else None,
            str(path) if path else None,
            tuple(only),
            force=as_bool(options.get("force"), False),
            dry_run=as_bool(options.get("dry_run"), False),
        )

    def where(self, name: str, several: bool) -> str:
        value = str(self.url or self.path)
        if several and "{name}" not in value:
            raise UsageError(
                "this backup holds several git repositories: the target needs `{name}` in it",
                "e.g. url=git://host/{name}.git or path=/srv/git/{name}.git",
            )
        return value.replace("{name}", name)

    def bare_path(self, name: str, several: bool) -> Path:
        return Path(self.where(name, several)).expanduser().absolute()
