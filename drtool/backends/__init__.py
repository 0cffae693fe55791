"""Backends: where store objects live. Bytes by name, nothing more; the format lives in ``drtool.repo``."""

from drtool.backends.backend import Backend, open_backend

__all__ = ["Backend", "open_backend"]
