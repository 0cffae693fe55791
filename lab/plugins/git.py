"""The git plugin's lab support: a GitOps repository on the lab's git server, with what makes restores hard.

Seeded into ``platform-config.git``: ``main`` and ``release-1.x`` with history, a lightweight and an
annotated tag, a branch ``feature/old-quota`` that was pushed, referenced by a pull-request ref
(``refs/pull/1/head``, as hosting services keep one) and then deleted, and a ``refs/keep-around/*`` ref.
A restore must bring back the branches and tags and nothing else.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from drtool_lab.components.git_server import GitServer
from drtool_lab.lab import Lab
from drtool_plugins.git.gitcmd import git

REPO = "platform-config"
DELETED_BRANCH = "feature/old-quota"
_AUTHOR = ["-c", "user.name=drtool lab", "-c", "user.email=lab@drtool.invalid"]


def server(lab: Lab) -> GitServer:
    found = lab.first(GitServer.kind)
    if not isinstance(found, GitServer):
        found = lab.add(GitServer.kind)
    lab.start(found)
    lab.save()
    assert isinstance(found, GitServer)
    return found


def _commit(work: Path, path: str, text: str, message: str) -> None:
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text)
    git("add", path, cwd=work)
    git(*_AUTHOR, "commit", "--quiet", "-m", message, cwd=work)


class GitLab:
    """``LabSupport`` for the git plugin."""

    kinds = (GitServer.kind,)

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        url = server(lab).create_repo(REPO)
        with tempfile.TemporaryDirectory(prefix="drtool-git-seed-") as tmp:
            work = Path(tmp)
            git("init", "--quiet", "--initial-branch=main", work)
            for i in range(max(1, scale) * 3):
                _commit(work, f"clusters/prod/quota-{i}.yaml", f"kind: ResourceFlavor\nindex: {i}\n", f"quota {i}")
            git("tag", "v1.0", cwd=work)
            git("checkout", "--quiet", "-b", "release-1.x", cwd=work)
            _commit(work, "clusters/prod/release.yaml", "release: 1.x\n", "release branch")
            git(*_AUTHOR, "tag", "-a", "v1.1", "-m", "release 1.1", cwd=work)
            git("checkout", "--quiet", "-b", DELETED_BRANCH, "main", cwd=work)
            _commit(work, "clusters/prod/old-quota.yaml", "quota: old\n", "old quota experiment")
            git("checkout", "--quiet", "main", cwd=work)
            _commit(work, "README.md", "# platform declarations\n", "readme")
            refs = ["refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*"]
            git("push", "--quiet", url, *refs, f"{DELETED_BRANCH}:refs/pull/1/head", cwd=work)
            git("push", "--quiet", url, f"{DELETED_BRANCH}:refs/keep-around/old", cwd=work)
            git("push", "--quiet", url, f":refs/heads/{DELETED_BRANCH}", cwd=work)
        return {"repos": [url]}

    def target(self, lab: Lab) -> dict[str, Any]:
        return {"url": server(lab).create_repo(REPO)}
