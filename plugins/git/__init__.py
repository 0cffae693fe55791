"""The git plugin: platform declaration (GitOps) repositories, every branch and tag, as verified git bundles.

Source settings: ``repos`` (URLs, or ``{name, url}`` mappings) or ``url`` (one repository); ``lfs``
(``fail``, the default, refuses a repository that uses Git LFS, whose objects are not backed up yet;
``skip`` backs up its history anyway). Credentials come from git itself (credential helper, SSH agent),
never from drtool's settings.

Restore target: ``url`` (push into an existing, empty remote) or ``path`` (create a bare repository);
with several repositories either holds ``{name}``; ``repos`` restricts to some. Option ``force`` lets a
push overwrite diverged branches; ``dry_run`` writes nothing. docs/git.md explains each.
"""

from __future__ import annotations

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["GitPlugin"]


class GitPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for git repositories."""

    name = "git"
    description = "git repositories (GitOps declarations): every branch and tag as a verified bundle"
    schema = SCHEMA
    discover = staticmethod(_backup.discover)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_deps.dependencies)
