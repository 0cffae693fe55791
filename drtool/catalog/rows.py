"""A manifest's rows in the catalog's three backup tables, as plain column -> value dicts.

One source for both writers: ``Catalog`` (SQLAlchemy, drtool/catalog/db.py) and the standard library's
``sqlite3`` in ``drtool.catalog.quick``, so the two cannot drift apart. Importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any

from drtool.repo.manifest import Manifest


def backup_row(m: Manifest) -> dict[str, Any]:
    """The ``backups`` row (``BackupRow``)."""
    return {
        "id": m.id,
        "store_id": m.store_id,
        "started": m.started,
        "finished": m.finished,
        "status": m.status,
        "backup_set": m.backup_set,
        "tags": ",".join(m.tags),
        "plugins": ",".join(sorted(m.plugins)),
        "failed_plugins": ",".join(sorted(p for p, o in m.plugins.items() if o.status == "failed")),
        "size": m.size,
        "artifact_count": len(m.artifacts),
        "bytes_stored": m.stats.get("bytes_stored", 0),
        "hostname": m.hostname,
    }


def chain_row(m: Manifest) -> dict[str, Any] | None:
    """The ``chain_links`` row (``ChainRow``), for a backup that is part of a delta chain."""
    return None if m.chain is None else {"backup_id": m.id, "kind": m.kind, **m.chain.model_dump()}


def artifact_rows(m: Manifest) -> list[dict[str, Any]]:
    """The ``artifacts`` rows (``ArtifactRow``), their ids left to the database."""
    return [
        {
            "backup_id": m.id,
            "plugin": a.plugin,
            "name": a.name,
            "size": a.size,
            "sha256": a.sha256,
            "chunk_count": len(a.chunks),
            "sensitive": a.sensitive,
        }
        for a in m.artifacts
    ]
