"""The plugin contract (DESIGN §3) and the manager that finds plugins through entry points."""

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
