"""The plugin contract (docs/plugins.md), the toolkit plugins share, and the manager that finds plugins through
entry points."""

from drtool.plugin.contract import (
    ArtifactInfo,
    BackupContext,
    Check,
    Dependency,
    Inventory,
    Plugin,
    RestoreContext,
    RestoreResult,
)

__all__ = [
    "ArtifactInfo",
    "BackupContext",
    "Check",
    "Dependency",
    "Inventory",
    "Plugin",
    "RestoreContext",
    "RestoreResult",
]
