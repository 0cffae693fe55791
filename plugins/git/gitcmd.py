"""Running the git CLI through gitpython, with failures turned into one-line drtool errors.

Never prompts (a backup runs unattended) and never carries credentials in argv: remotes authenticate with
git's own mechanisms (credential helper, SSH agent, ``http.extraHeader`` from the environment), which is
why ``check_url`` refuses URLs with a password in them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from urllib.parse import urlsplit

# gitpython refuses to import on a machine without git unless told to stay quiet; drtool must still start there
# (every other plugin works, and `drtool demo` leaves this one out with the reason): a git command then fails
# with GitCommandNotFound, said below as "git is not installed"
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")

from git.cmd import Git
from git.exc import GitCommandError, GitCommandNotFound

from drtool.errors import SourceError, UsageError

ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
TIMEOUT = 3600.0
# refs a restore recreates; everything else (refs/pull/*, refs/remotes/*, refs/keep-around/*,
# refs/merge-requests/*, refs/changes/*, ...) is host-specific and stays in the bundle only
PORTABLE = ("refs/heads/", "refs/tags/")


def git(*args: str | Path, cwd: Path | None = None, what: str = "git") -> str:
    """Run ``git args...``; a failure raises SourceError with git's last stderr line."""
    try:
        return Git(str(cwd) if cwd else None).execute(
            ["git", *map(str, args)], env=ENV, kill_after_timeout=TIMEOUT, strip_newline_in_stdout=True
        )
    except GitCommandNotFound:
        raise SourceError("git is not installed", "apt-get install git") from None
    except GitCommandError as exc:
        raise SourceError(f"{what} failed: {_reason(str(exc.stderr or ''))}") from None


def _reason(stderr: str) -> str:
    """git's first ``fatal:``/``error:`` line (the cause; later lines are advice), else its last line."""
    lines = [ln.strip() for ln in stderr.replace("stderr:", "").strip(" '\n").splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return (causes or lines or ["unknown error"])[0 if causes else -1]


def check_url(url: str) -> str:
    if urlsplit(url).password:
        raise UsageError(
            "git remote URLs must not carry a password",
            "configure a git credential helper or an SSH key for that host instead",
        )
    return url


@dataclasses.dataclass(frozen=True)
class Ref:
    name: str
    object: str  # what the ref points at (an annotated tag's own object for tags)
    commit: str  # the commit it resolves to
    time: str  # that commit's committer date, ISO 8601


def list_refs(repo: Path | None = None, url: str | None = None) -> dict[str, Ref]:
    """Every ref of a local repository (with commit times), or of a remote (``ls-remote``: names and ids)."""
    if url is not None:
        out = git("ls-remote", "--refs", url, what=f"listing refs of {url}")
        refs = {}
        for line in out.splitlines():
            sha, name = line.split("\t", 1)
            refs[name] = Ref(name, sha, "", "")
        return refs
    fmt = "%(refname)%00%(objectname)%00%(*objectname)%00%(committerdate:iso-strict)%00%(*committerdate:iso-strict)"
    out = git("for-each-ref", f"--format={fmt}", cwd=repo, what="listing refs")
    refs = {}
    for line in out.splitlines():
        name, obj, peeled, date, peeled_date = line.split("\0")
        refs[name] = Ref(name, obj, peeled or obj, peeled_date or date)
    return refs


def portable(refs: dict[str, Ref]) -> dict[str, str]:
    """Branches and tags, name -> object id: what a restore recreates and verify compares."""
    return {name: r.object for name, r in refs.items() if name.startswith(PORTABLE)}
