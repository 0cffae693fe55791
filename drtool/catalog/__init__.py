"""The catalog: a SQL cache of what the store holds, for fast listing and history. The store is the truth;
`drtool catalog rebuild` recreates the catalog from the store alone."""

from drtool.catalog.db import Catalog

__all__ = ["Catalog"]
