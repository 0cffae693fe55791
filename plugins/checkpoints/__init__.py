"""The ``checkpoints`` plugin: training checkpoints in S3 buckets and directories, complete ones only.

Knows PyTorch Distributed Checkpoint directories, Hugging Face safetensors shards, directories with a
completion marker, and kubelet container checkpoint archives (sensitive: a process's whole memory). A
checkpoint that changes while it is read is copied again or skipped, never stored torn; unchanged objects
are taken from the previous backup by reference. Restore writes each checkpoint's commit files last.

Source settings: ``sources`` (list of ``url: s3://B/P`` or ``path: DIR``, with ``name``, ``endpoint_url``,
``credentials_file``, ``markers``, ``run``, ``include``, ``exclude``, ``milestones``), ``workers``,
``retries``, ``reread``, ``verify_source_checksums``, ``ranged_threshold``, ``range_size``,
``ranges_in_flight``. Target: ``url`` or ``path`` (+ ``endpoint_url``, ``credentials_file``). Restore
options: ``checkpoints`` (names/globs), ``source``, ``overwrite``, ``workers``, ``verify`` (``sample``: check what
this restore wrote by its receipts and a sample read back; ``full``). docs/checkpoints.md explains each.
"""

from __future__ import annotations

from collections.abc import Sequence

from drtool.plugin.checks import PlatformCheck
from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import restore as _restore
from . import shards as _shards
from .schema import SCHEMA

__all__ = ["CheckpointsPlugin"]


class CheckpointsPlugin(BasePlugin):
    name = "checkpoints"
    description = "Training checkpoints (DCP, safetensors, marker dirs, container archives) from S3 or disk"
    schema = SCHEMA
    shardable = True  # docs/scaling.md: each worker of a sharded backup copies its share of every checkpoint
    discover = staticmethod(_backup.discover)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_restore.run_verify)
    dependencies = staticmethod(_restore.dependencies)
    merge_shards = staticmethod(_shards.merge)

    def platform_checks(self) -> Sequence[PlatformCheck]:
        """``training-resumes``: a restored run resumes from its last complete checkpoint, bit for bit."""
        from . import resume_check

        return (resume_check.CHECK,)
