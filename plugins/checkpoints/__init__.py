"""The ``checkpoints`` plugin: training checkpoints in S3 buckets and directories, complete ones only.

Knows PyTorch Distributed Checkpoint directories, Hugging Face safetensors shards, directories with a
completion marker, and kubelet container checkpoint archives (sensitive: a process's whole memory). A
checkpoint that changes while it is read is copied again or skipped, never stored torn; unchanged objects
are taken from the previous backup by reference. Restore writes each checkpoint's commit files last.

Source settings: ``sources`` (list of ``url: s3://B/P`` or ``path: DIR``, with ``name``, ``endpoint_url``,
``lab``, ``markers``, ``run``, ``include``, ``exclude``, ``milestones``), ``workers``, ``retries``, ``reread``,
``verify_source_checksums``. Target: ``url`` or ``path`` (+ ``endpoint_url``, ``lab``). Restore options:
``checkpoints`` (names/globs), ``source``, ``overwrite``, ``workers``. docs/checkpoints.md explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.plugin.contract import BackupContext, Check, Dependency, Inventory, RestoreContext, RestoreResult

from . import backup as _backup
from . import restore as _restore
from .lab import CheckpointsLab

__all__ = ["CheckpointsPlugin"]


class CheckpointsPlugin:
    name = "checkpoints"
    description = "Training checkpoints (DCP, safetensors, marker dirs, container archives) from S3 or disk"
    lab = CheckpointsLab()

    def discover(self, source: Mapping[str, Any]) -> Inventory:
        return _backup.discover(source)

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        return _backup.backup(source, ctx)

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        return _restore.run_restore(ctx, target, options)

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return _restore.run_verify(ctx, target, options)

    def dependencies(self, ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
        return _restore.dependencies(ctx, target)
