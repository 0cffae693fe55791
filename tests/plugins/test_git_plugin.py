"""The git plugin against a real ``git daemon`` on loopback, seeded by the plugin's LabSupport.

The seeded ``platform-config`` repository has two branches, a lightweight and an annotated tag, and a
branch that was deleted after a pull-request ref (``refs/pull/1/head``) and a ``refs/keep-around/*`` ref
were made to point at it. Restores are read back with plain ``git`` (ls-remote, for-each-ref, fsck),
not through the plugin.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.plugins.git import DELETED_BRANCH
from drtool_lab.support import LabSupport, lab_support
from drtool_plugins.git import GitPlugin

from drtool.errors import UsageError
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import restore_dependencies, run_restore
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.noise import noise

plugin = GitPlugin()


def backup(repo: Repository, settings: dict[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, settings)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def refs(where: str) -> dict[str, str]:
    out = subprocess.run(["git", "ls-remote", where], capture_output=True, text=True, check=True).stdout
    return {name: sha for sha, name in (line.split("\t") for line in out.splitlines()) if name != "HEAD"}


def portable(all_refs: dict[str, str]) -> dict[str, str]:
    return {n: s for n, s in all_refs.items() if n.startswith(("refs/heads/", "refs/tags/"))}


def test_backup_then_push_into_a_new_remote(
    repo: Repository, git_source: dict[str, Any], git_target: dict[str, Any]
) -> None:
    source_refs = refs(git_source["repos"][0])
    assert plugin.discover(git_source).counts == {"repos": 1, "branches": 2, "tags": 2, "other_refs": 2}
    assert "refs/pull/1/head" in source_refs and f"refs/heads/{DELETED_BRANCH}" not in source_refs
    manifest = backup(repo, git_source)
    meta = manifest.plugins["git"].meta["repos"]["platform-config"]
    assert set(meta["branches"]) == {"main", "release-1.x"} and set(meta["tags"]) == {"v1.0", "v1.1"}
    assert meta["branches"]["main"]["commit"] == source_refs["refs/heads/main"]
    assert meta["newest_commit_time"] and meta["head"] == "main"
    assert meta["host_refs_not_restored"] == {"refs/pull/*": 1, "refs/keep-around/*": 1}
    assert manifest.failure_domain["git_hosts"] == ["127.0.0.1"]
    assert manifest.failure_domain["git_remotes"] == git_source["repos"]

    assert isinstance(lab_support("git"), LabSupport)
    target = git_target  # an empty repository on another lab's git daemon
    deps = restore_dependencies(repo, plugin, manifest, target)
    assert any(d.kind == "endpoint" and d.address == target["url"] for d in deps)
    dry = run_restore(repo, manifest, plugin, target, options={"dry_run": True})
    assert (dry.checks, dry.verification, dry.verified, dry.failed) == ([], "none", False, False)  # nothing to check
    assert dry.result.details["repos"] == {"platform-config": "would push 4 refs"} and refs(target["url"]) == {}
    outcome = run_restore(repo, manifest, plugin, target)
    assert outcome.result.changed and outcome.verified, outcome.checks
    restored = refs(target["url"])
    assert restored == portable(source_refs)  # annotated tag objects included, same ids
    assert not any(n.startswith(("refs/pull/", "refs/keep-around/")) for n in restored)
    assert f"refs/heads/{DELETED_BRANCH}" not in restored

    again = run_restore(repo, manifest, plugin, target)
    assert again.result.changed is False and again.verified


def test_restore_as_a_bare_repository(repo: Repository, git_source: dict[str, Any], tmp_path: Path) -> None:
    manifest = backup(repo, git_source)
    path = tmp_path / "srv" / "platform-config.git"
    outcome = run_restore(repo, manifest, plugin, {"path": str(path)})
    assert outcome.result.changed and outcome.verified, outcome.checks
    assert refs(str(path)) == portable(refs(git_source["repos"][0]))
    head = subprocess.run(["git", "-C", str(path), "symbolic-ref", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout.strip() == "refs/heads/main"
    subprocess.run(["git", "-C", str(path), "fsck", "--no-dangling"], check=True, capture_output=True)
    # the restored repository serves a working clone with the declarations in it
    with tempfile.TemporaryDirectory() as clone:
        subprocess.run(["git", "clone", "-q", str(path), clone], check=True)
        assert (Path(clone) / "clusters/prod/quota-0.yaml").exists()
        assert not (Path(clone) / "clusters/prod/old-quota.yaml").exists()

    assert run_restore(repo, manifest, plugin, {"path": str(path)}).result.changed is False
    other = tmp_path / "other.git"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "fetch", "-q", str(path), "main:refs/heads/unrelated"], check=True)
    with pytest.raises(UsageError, match="already holds a different git repository"):
        run_restore(repo, manifest, plugin, {"path": str(other)})


def test_cli_round_trip(cli: Cli, tmp_path: Path, git_source: dict[str, Any]) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"store": str(tmp_path / "store"), "sources": {"git": git_source}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    made = json.loads(cli("backup", "--json", check=True).stdout)
    assert made["status"] == "complete"
    path = tmp_path / "restored" / "{name}.git"
    restored = json.loads(cli("restore", made["id"], "-p", "git", "-t", f"path={path}", "--json", check=True).stdout)
    assert restored["verified"] and restored["details"]["repos"] == {"platform-config": "created bare repository"}
    assert_clean_error(cli("restore", made["id"], "-p", "git"), 2, "exactly one of `url` or `path`")


def _lfs_repo(tmp_path: Path) -> tuple[str, bytes]:
    """A repository on a file:// remote (git-lfs's standalone transfer: no LFS server needed) with one LFS file."""
    origin = tmp_path / "lfs-origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    work = tmp_path / "lfs-work"
    content = noise(300_000)
    run = {"cwd": work, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run(["git", "lfs", "install", "--local"], **run)
    subprocess.run(["git", "lfs", "track", "*.safetensors"], **run)
    (work / "model.safetensors").write_bytes(content)
    subprocess.run(["git", "add", "."], **run)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "weights"], **run)
    subprocess.run(["git", "push", "-q", f"file://{origin}", "main"], **run)
    return f"file://{origin}", content


@pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed (tests/run.sh installs it)")
def test_lfs_objects_round_trip(repo: Repository, tmp_path: Path) -> None:
    url, content = _lfs_repo(tmp_path)
    manifest = backup(repo, {"url": url})
    lfs_meta = manifest.plugins["git"].meta["repos"]["lfs-origin"]["lfs"]
    assert lfs_meta == {"used": True, "objects": 1, "bytes": len(content), "artifact": "lfs-origin.lfs.tar"}

    remote = tmp_path / "new-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    outcome = run_restore(repo, manifest, plugin, {"url": f"file://{remote}"})
    assert outcome.verified, outcome.checks
    assert "LFS objects" in " ".join(c.name for c in outcome.checks)
    clone = tmp_path / "clone"
    smudge = ["-c", "filter.lfs.process=git-lfs filter-process", "-c", "filter.lfs.required=true"]
    subprocess.run(["git", *smudge, "clone", "-q", f"file://{remote}", str(clone)], check=True, capture_output=True)
    assert (clone / "model.safetensors").read_bytes() == content  # smudged from the restored LFS objects

    bare = run_restore(repo, manifest, plugin, {"path": str(tmp_path / "bare.git")})
    assert bare.verified, bare.checks
    skipped = backup(repo, {"url": url, "lfs": "skip"}).plugins["git"].meta["repos"]["lfs-origin"]["lfs"]
    assert skipped["used"] and skipped["objects"] is None


def test_unreachable_remote_and_bad_settings_fail_cleanly(repo: Repository) -> None:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {"url": "git://127.0.0.1:1/gone.git"})
    assert outcome.status == "failed" and "unable to connect" in outcome.error
    with pytest.raises(UsageError, match="must not carry a password"):
        plugin.discover({"url": "https://user:secret@git.example.com/platform.git"})
