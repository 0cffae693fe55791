"""The catalog: a SQL cache of what the store holds, for fast listing and history. The store is the truth;
`drtool catalog rebuild` recreates the catalog from the store alone.

``Catalog`` is imported on first use (PEP 562): SQLAlchemy and SQLModel take about 0.45 CPU-seconds to import,
and a backup recording into an existing SQLite catalog (``drtool.catalog.quick``) needs neither."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drtool.catalog.db import Catalog

__all__ = ["Catalog"]


def __getattr__(name: str) -> Any:
    if name == "Catalog":
        from drtool.catalog.db import Catalog

        return Catalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
