"""The ``files`` plugin: files and directories that must outlive the cluster, streamed as one tar.

Typical use is escrow of what an etcd snapshot does not hold: the cluster and etcd CAs, the service-account
signing key pair, the EncryptionConfiguration (without it, Secrets in the snapshot cannot be decrypted).
Everything is encrypted in the store like any artifact, and the artifact is marked sensitive.
A file unchanged since the parent backup is not read again (plugins/files/unchanged.py); the source setting
``force_read: true`` (or `drtool backup --force-read`) reads every file.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from drtool.errors import SourceError, UsageError
from drtool.plugin import settings
from drtool.plugin.contract import BackupContext, BasePlugin, Check, Inventory, RestoreContext, RestoreResult
from drtool.plugin.toolkit import archive, paths

from .schema import SCHEMA, Source, Target
from .unchanged import ARTIFACT, IO_BLOCK, ParentIndex, TreeWriter

ARCHIVE = f"files: {ARTIFACT}"
MARKER = ".drtool-restored"


def _paths(source: Mapping[str, Any]) -> list[Path]:
    raw = settings.read(Source, source, "source", "files").paths
    if not raw:
        raise UsageError(
            "files plugin needs `paths` in its source settings", "e.g. sources: {files: {paths: [/etc/kubernetes/pki]}}"
        )
    paths = [Path(p).expanduser() for p in raw]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SourceError(f"files: {', '.join(missing)} not found", "check the paths in the files source settings")
    return paths


def _walk(paths: list[Path]) -> tuple[int, int]:
    count = size = 0
    for root in paths:
        for p in [root, *root.rglob("*")] if root.is_dir() else [root]:
            if p.is_file():
                count += 1
                size += p.stat().st_size
    return count, size


def _same(path: Path, expected: IO[bytes], block: int = 1 << 20) -> bool:
    """Compare a restored file with an archive member block by block (files may be large)."""
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        while True:
            a, b = f.read(block), expected.read(block)
            if a != b:
                return False
            if not a:
                return True


class FilesPlugin(BasePlugin):
    name = "files"
    description = "Files and directories (PKI, service-account keys, encryption config) as one tar"
    schema = SCHEMA

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        count, size = _walk(_paths(source))
        return Inventory(counts={"files": count}, bytes=size)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        paths = _paths(source)
        count, size = _walk(paths)
        roots = {f"{i}-{path.name}": path for i, path in enumerate(paths)}
        names = [os.path.abspath(p) for p in paths]  # the parent index is used only for the very same roots
        parent = ParentIndex(ctx, names, force_read=settings.read(Source, source, "source", "files").force_read)
        task = ctx.progress("files", size)
        with ctx.artifact(ARTIFACT, meta={"roots": names}, sensitive=True) as sink:
            writer = TreeWriter(sink, parent, task)
            writer.write_roots(roots)
            sink.meta["index"] = writer.index  # inside the sealed manifest: the next backup's parent index
        task.done()
        skipped = writer.stats
        return {
            "files": count,
            "bytes": size,
            "roots": {name: str(path) for name, path in roots.items()},
            **skipped,
            "summary": f"{skipped['files_skipped']} unchanged file(s), {skipped['bytes_skipped']} bytes, not read; "
            f"{skipped['files_read']} read ({skipped['bytes_read']} bytes)",
        }

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        where = settings.read(Target, target, "target", "files").path
        if not where:
            raise UsageError("files restore needs target path=DIR")
        dest = Path(where).expanduser()
        marker = dest / MARKER
        if marker.exists() and marker.read_text().strip() == ctx.backup_id:
            return RestoreResult(changed=False, summary=f"{dest} already holds backup {ctx.backup_id}")
        if dest.exists() and any(dest.iterdir()):
            raise UsageError(f"{dest} is not empty", "restore into a new directory")
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".drtool-staging-", dir=dest.parent))
        try:
            with ctx.open(ARTIFACT) as source, tarfile.open(fileobj=source, mode="r|", bufsize=IO_BLOCK) as tar:  # type: ignore[call-overload]
                archive.extract_all(tar, staging, ARCHIVE)  # regular files and folders under staging only
            (staging / MARKER).write_text(ctx.backup_id)
            if dest.exists():
                dest.rmdir()
            os.rename(staging, dest)
        except tarfile.TarError as exc:
            raise SourceError(f"files: archive rejected: {exc}", "the artifact holds unsafe paths") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        count, size = _walk([dest])
        return RestoreResult(changed=True, summary=f"{count - 1} file(s) restored into {dest}", details={"bytes": size})

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        dest = Path(str(settings.read(Target, target, "target", "files").path)).expanduser()
        differ: list[str] = []
        total = 0
        with ctx.open(ARTIFACT) as source, tarfile.open(fileobj=source, mode="r|", bufsize=IO_BLOCK) as tar:  # type: ignore[call-overload]
            for member in archive.members(tar, ARCHIVE):
                if member.isfile():
                    total += 1
                    expected = tar.extractfile(member)
                    if expected is None or not _same(paths.under(dest, member.name, ARCHIVE), expected):
                        differ.append(member.name)
        if not total:
            return []  # a backup of no files: nothing compared, so no check (the verdict says "none", not "passed")
        detail = f"{total - len(differ)}/{total} equal" + (f"; differ: {differ[:5]}" if differ else "")
        return [Check("files equal to backup", not differ, detail)]
